"""Case tables shared by the reduction operators (sum, reduce_max, reduce_mean)."""

from __future__ import annotations

from ..testing.cases import Case, T


def reduced_shape(shape, axes, keepdim):
    nd = len(shape)
    axes = {a % nd for a in axes} if axes and nd else set(range(nd))
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce_cases(dtypes, attr_of, *, allow_all=True, allow_empty_extent=True, single_axis=False, keep_choices=(False, True)):
    """Layouts every reduction covers; ``attr_of(axes, keepdim)`` builds the case's attributes."""
    dt = tuple(sorted(dtypes))

    def case(shape, axes, keepdim=False, x_strides=None, y_strides=None, desc="", suites=("quick",)):
        y = reduced_shape(shape, axes, keepdim)
        return Case(
            {"output": T(y, y_strides), "input": T(shape, x_strides)},
            dt,
            desc or f"{list(shape)} dims {list(axes)} keepdim={keepdim}",
            attrs=attr_of(axes, keepdim),
            suites=suites,
        )

    cases = [
        case((13, 4), (1,), True, desc="13x4 last dim, keepdim"),
        case((13, 4), (-1,), False, (10, 1), desc="padded rows (10,1), last dim"),
        case((13, 4), (0,), False, desc="13x4 first dim (columns)"),
        case((13, 7), (0,), False, (1, 13), desc="column-major input, dim 0"),
        case((13, 7), (1,), False, (1, 13), desc="column-major input, dim 1 (strided rows)"),
        case((5, 3, 7), (1,), False, desc="middle dim"),
        case((5, 3, 7), (1,), True, y_strides=(1, 7, 5), desc="middle dim, permuted keepdim output"),
        case((4, 6, 10), (1,), False, (60, 1, 6), desc="permuted input (60,1,6), dim 1"),
        case((3, 4097), (-1,), False, desc="rows longer than a block (4097)"),
        case((3, 17), (1,), False, desc="rows shorter than a warp (17)"),
        case((2, 9000), (1,), False, desc="long rows (split over chunks)"),
        case((9000, 3), (0,), False, desc="long columns (split over chunks)"),
        case((3, 20011), (-1,), False, desc="rows of 20011 (batched loads + remainder, split, block finish)"),
        case((7, 4099), (1,), False, (4103, 1), desc="rows of 4099, odd row stride (head, batches, tail)"),
        case((33, 70), (0,), False, desc="33x70 columns"),
        case((1000, 36), (0,), False, desc="1000x36 dim 0 (one-launch column tile, odd tail)"),
        case((3, 700, 20), (1,), False, desc="middle dim of 700 (column tile)"),
        case((6, 5), (1,), False, (0, 1), desc="zero-stride (broadcast) input rows"),
        case((4, 6, 10), (2,), False, (120, 20, 2), desc="gapped innermost stride 2"),
        case((0, 5), (1,), False, desc="empty output"),
    ]
    if not single_axis:
        cases += [
            case((5, 3, 7), (0, 2), False, desc="dims (0, 2)"),
            case((4, 6, 10), (0, 1), True, desc="dims (0, 1) keepdim (columns, multi-axis)"),
            case((4, 6, 10), (2, 0), False, (1, 4, 24), desc="dims (2, 0), reversed-stride input"),
            case((2, 3, 4, 5), (1, 3), False, (60, 1, 15, 3), desc="4-d permuted, dims (1, 3)"),
            case((64, 3, 64, 8), (0, 2), False, desc="dims (0, 2): column tile over two reduced dims"),
        ]
    if allow_all:
        cases += [
            case((13, 4), (), False, desc="all dims -> 0-d"),
            case((13, 4), (), True, (10, 1), desc="all dims keepdim, padded"),
            case((), (), False, desc="0-d input"),
            case((70001,), (), False, desc="full reduction 70001 (split + finish)"),
            case((5, 6007), (), False, (6016, 1), desc="full reduction of padded rows (outer split)"),
            case((40, 300), (), False, (1, 40), desc="full reduction, transposed"),
        ]
    if allow_empty_extent:
        cases.append(case((5, 0), (1,), False, desc="empty reduced extent"))
    cases += [
        case((4, 512, 896), (-1,), False, desc="(4,512,896) last dim", suites=("full",)),
        case((4, 512, 896), (0, 1) if not single_axis else (1,), False, desc="(4,512,896) outer dims", suites=("full",)),
        case((1024, 1024), (0,), False, desc="1024^2 dim 0", suites=("full",)),
    ]
    return cases
