from ..tril.cases import tri_cases

CASES = tri_cases()
