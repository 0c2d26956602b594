from ..logical_and.cases import logical_cases
from . import SPEC

CASES = logical_cases(SPEC)
