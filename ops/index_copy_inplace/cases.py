from ..index_copy.cases import make

CASES = [c for c in make(base=None) if "in-place" not in c.description]
