import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import (
    check_shuffle_matrix,
    conservation_defect,
    is_conserved,
    leftover_matrix,
    pair_minima,
    placements_from_matrix,
    read_shuffle_matrix,
    shuffle_matrix,
    shuffle_matrix_from_permutations,
)
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import rates
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES


def brute_shuffle_matrix(a, b, K):
    S = [[0] * K for _ in range(K)]
    for i, j in zip(a, b, strict=True):
        S[int(i)][int(j)] += 1
    return S


def test_shuffle_matrix_against_loop(rng):
    for K in (1, 2, 5, 9):
        N = int(rng.integers(K, 200))
        a = epoch_placement(N, K, seed=int(rng.integers(100)), epoch=0)
        b = epoch_placement(N, K, seed=int(rng.integers(100)), epoch=1)
        S = shuffle_matrix(a, b)
        assert S.tolist() == brute_shuffle_matrix(a.owner, b.owner, K)
        assert S.sum(axis=1).tolist() == a.sizes().tolist()
        assert S.sum(axis=0).tolist() == b.sizes().tolist()
        assert not S.flags.writeable


def test_shuffle_matrix_chunks(monkeypatch, rng):
    import coded_shuffle.matrix as m

    monkeypatch.setattr(m, "_CHUNK", 7)
    a = placement_from_owner(rng.integers(0, 3, 50), 3)
    b = placement_from_owner(rng.integers(0, 3, 50), 3)
    assert shuffle_matrix(a, b).tolist() == brute_shuffle_matrix(a.owner, b.owner, 3)


def test_shuffle_matrix_large_K_no_wraparound():
    # uint16 owners times K would wrap at 2^16 if not cast first.
    K = 300
    a = placement_from_owner(np.arange(K), K)
    b = placement_from_owner((np.arange(K) + 1) % K, K)
    S = shuffle_matrix(a, b)
    assert S.sum() == K
    assert all(S[k, (k + 1) % K] == 1 for k in range(K))


def test_paper_example1_leftovers():
    # Example 1: 4 order-2 symbols; the 3 leftovers form one cycle.
    assert int(np.triu(pair_minima(EXAMPLE_1), 1).sum()) == EXAMPLE_1_VALUES["pairs"]
    omega = leftover_matrix(EXAMPLE_1)
    assert omega.sum() == EXAMPLE_1_VALUES["leftovers"]
    assert is_conserved(EXAMPLE_1)


def test_conservation_with_equal_and_unequal_batches(rng):
    a = epoch_placement(120, 6, seed=1, epoch=0)
    b = epoch_placement(120, 6, seed=1, epoch=1)
    assert is_conserved(shuffle_matrix(a, b))
    # Unequal batches: worker 0 holds 3 and needs 2.
    S = [[1, 2], [1, 0]]
    assert conservation_defect(S).tolist() == [1, -1]
    assert not is_conserved(S)


def test_from_permutations_and_back():
    S = shuffle_matrix_from_permutations([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], 3)
    assert S.tolist() == [[0, 0, 2], [0, 2, 0], [2, 0, 0]]
    a, b = placements_from_matrix(EXAMPLE_1)
    assert shuffle_matrix(a, b).tolist() == [list(row) for row in EXAMPLE_1]


def test_check_shuffle_matrix_exceptions():
    with pytest.raises(ValueError, match="square"):
        check_shuffle_matrix([[1, 2, 3], [1, 2, 3]])
    with pytest.raises(ValueError, match="non-negative"):
        check_shuffle_matrix([[1, -1], [0, 1]])
    with pytest.raises(ValueError, match="integers"):
        check_shuffle_matrix([[1.5, 0], [0, 1]])
    with pytest.raises(ValueError, match="2 dimension"):
        check_shuffle_matrix([1, 2])
    with pytest.raises(ValueError, match="rectangular|integers"):
        check_shuffle_matrix([[1, 2], [3]])
    with pytest.raises(ValueError, match="at least 1 worker"):
        check_shuffle_matrix(np.zeros((0, 0), dtype=int))
    with pytest.raises(ValueError, match="'S'"):
        leftover_matrix([["a", "b"], ["c", "d"]])
    # Never a wrong answer from a sum past int64 (it was -2 for this matrix's uncoded load): the
    # total is checked exactly, and 2**53 points is the most any load or bound is exact for.
    with pytest.raises(ValueError, match=r"'S' must count at most 2\*\*53 .* not 18446744073709551614"):
        check_shuffle_matrix([[0, 2**63 - 1], [2**63 - 1, 0]])
    with pytest.raises(ValueError, match="'S' must count at most"):
        check_shuffle_matrix([[0, 2**52 + 1], [2**52, 0]])
    assert int(check_shuffle_matrix([[0, 2**52], [2**52, 0]]).sum()) == 2**53  # the largest allowed
    with pytest.raises(ValueError, match="'S' must hold integers below 2\\*\\*63"):
        check_shuffle_matrix(np.array([[0, 2**63], [1, 0]], dtype=np.uint64))  # would wrap to < 0
    with pytest.raises(ValueError, match=IN_INT64 + r"1180591620717411303424\."):
        check_shuffle_matrix([[0, 2**70], [1, 0]])


IN_INT64 = r"'S' must hold integers in \[-2\*\*63, 2\*\*63\), not "


@pytest.mark.parametrize(
    ("S", "shown"),
    [
        ([[0, 2**63], [1, 0]], "9223372036854775808"),  # numpy alone reads this list as float64
        ([[0, 1], [-(2**63) - 1, 0]], "-9223372036854775809"),
        (((0, 2**64), (1, 0)), "18446744073709551616"),
    ],
)
def test_python_ints_past_int64_are_refused_as_they_are(S, shown):
    """A Python int past int64 in a list is named as given, with no numpy warning on the way
    (it was refused as "negative, -9223372036854775808" after a RuntimeWarning of a cast)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=IN_INT64 + shown + r"\."):
            check_shuffle_matrix(S)
        with pytest.raises(ValueError, match=r"'S' must hold integers below 2\*\*63, not 1e\+19"):
            check_shuffle_matrix(np.array([[0.0, 1e19], [1.0, 0.0]]))
    # Python ints within int64 are kept exact, never read through float64.
    from coded_shuffle._checks import check_int_array

    assert check_int_array([2**63 - 1, 1], "x", ndim=1).tolist() == [2**63 - 1, 1]


def test_rates_exact_at_the_largest_size():
    # Loads of a 2-worker swap of 2**52 points each way, by hand: every point moves (uncoded
    # 2**53), each pair is one XOR (paired = coded = 2**52), and the bound is 2**52 too.
    from coded_shuffle import lower_bound, rates

    r = rates([[0, 2**52], [2**52, 0]])
    assert (r.uncoded, r.paired, r.coded) == (2**53, 2**52, 2**52)
    assert lower_bound([[0, 2**52], [2**52, 0]]).value == 2**52


def test_shuffle_matrix_exceptions():
    a = placement_from_owner([0, 1], 2)
    with pytest.raises(TypeError, match="'placement_t'"):
        shuffle_matrix([0, 1], a)
    with pytest.raises(ValueError, match="'placement_t1'"):
        shuffle_matrix(a, placement_from_owner([0, 1, 1], 2))


def test_feistel_shuffle_matrix_progress():
    from coded_shuffle.matrix import feistel_shuffle_matrix

    walked = []
    S = feistel_shuffle_matrix(1000, 3, 5, seed=1, epoch=2, chunk=300, progress=walked.append)
    assert walked == [300, 600, 900, 1000]
    assert S.tolist() == feistel_shuffle_matrix(1000, 3, 5, seed=1, epoch=2).tolist()


def numpy_feistel_shuffle_matrix(N, K_t, K_t1, *, seed, epoch, chunk=1 << 22):
    """The chunked numpy computation feistel_shuffle_matrix replaced, kept as the oracle: the
    numpy Feistel network (never the compiled walk), positions_to_owners, one bincount a chunk."""
    import coded_shuffle.orders.feistel as feistel
    from coded_shuffle.orders.epochs import positions_to_owners
    from coded_shuffle.orders.feistel import feistel_permutation

    pi_t = feistel_permutation(N, seed=seed, epoch=epoch)
    pi_t1 = feistel_permutation(N, seed=seed, epoch=epoch + 1)
    counts = np.zeros(K_t * K_t1, dtype=np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(feistel, "_COMPILED_FROM", 1 << 62)
        for lo in range(0, N, chunk):
            pos = np.arange(lo, min(lo + chunk, N), dtype=np.int64)
            key = positions_to_owners(pos, N, K_t).astype(np.int64)
            key *= K_t1
            key += positions_to_owners(pi_t1.inverse(pi_t.forward(pos)), N, K_t1)
            counts += np.bincount(key, minlength=K_t * K_t1)
    return counts.reshape(K_t, K_t1)


@pytest.fixture
def two_threads(monkeypatch):
    """The two-thread path from 4096 positions on, whatever the machine's cores."""
    import coded_shuffle.matrix as m

    monkeypatch.setattr(m, "_TWO_THREADS_FROM", 1 << 12)
    monkeypatch.setattr(m, "_cores", lambda: 2)


@settings(max_examples=40, deadline=None)
@given(N=st.integers(1, 400), K_t=st.integers(1, 12), K_t1=st.integers(1, 12), seed=st.integers(0, 2**20))
def test_feistel_shuffle_matrix_equals_materialized(N, K_t, K_t1, seed):
    from coded_shuffle.matrix import feistel_shuffle_matrix
    from coded_shuffle.orders import OrderSpec, order_placement

    K_t, K_t1 = min(K_t, N), min(K_t1, N)
    spec = OrderSpec("feistel")
    a = order_placement(N, K_t, seed=seed, epoch=6, spec=spec)
    b = order_placement(N, K_t1, seed=seed, epoch=7, spec=spec)
    S = feistel_shuffle_matrix(N, K_t, K_t1, seed=seed, epoch=6, chunk=1 + seed % 97)
    assert S.tolist() == shuffle_matrix(a, b).tolist()
    assert not S.flags.writeable


@pytest.mark.parametrize(
    ("N", "K_t", "K_t1", "chunk"),
    [(10**6 + 7, 1024, 1000, 1 << 16), (999_983, 5, 13, 300_001), (2**20 + 1, 64, 64, 1 << 22)],
)
def test_feistel_shuffle_matrix_equals_numpy_path(N, K_t, K_t1, chunk, two_threads):
    # Unequal K, N divisible by neither, pieces shared by two threads (and one piece of all of N).
    from coded_shuffle.matrix import feistel_shuffle_matrix

    S = feistel_shuffle_matrix(N, K_t, K_t1, seed=17, epoch=2, chunk=chunk)
    assert S.tolist() == numpy_feistel_shuffle_matrix(N, K_t, K_t1, seed=17, epoch=2).tolist()
    assert int(S.sum()) == N


def test_feistel_shuffle_matrix_progress_two_threads(two_threads):
    from coded_shuffle.matrix import feistel_shuffle_matrix

    walked: list[int] = []
    S = feistel_shuffle_matrix(100_000, 7, 3, seed=4, epoch=0, chunk=999, progress=walked.append)
    assert len(walked) == -(-100_000 // 999)
    assert walked == sorted(walked) and walked[-1] == 100_000
    assert S.tolist() == feistel_shuffle_matrix(100_000, 7, 3, seed=4, epoch=0, chunk=10**6).tolist()


def test_feistel_shuffle_matrix_stops_on_error(two_threads):
    # An exception from progress (a Ctrl-C, say) stops both threads at their next piece.
    from coded_shuffle.matrix import feistel_shuffle_matrix

    walked: list[int] = []

    def progress(done: int) -> None:
        walked.append(done)
        if len(walked) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        feistel_shuffle_matrix(1 << 20, 4, 4, seed=0, epoch=0, chunk=1 << 10, progress=progress)
    assert len(walked) == 3


def test_feistel_shuffle_matrix_after_fork(two_threads):
    # A forked child inherits the pool but not its thread: it makes its own.
    import multiprocessing

    from coded_shuffle.matrix import feistel_shuffle_matrix

    S = feistel_shuffle_matrix(50_000, 3, 4, seed=9, epoch=1, chunk=5000)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        child = pool.apply_async(_feistel_in_child).get(timeout=120)
    assert child == S.tolist()


def _feistel_in_child():
    import coded_shuffle.matrix as m

    m._TWO_THREADS_FROM, m._cores = 1 << 12, lambda: 2
    return m.feistel_shuffle_matrix(50_000, 3, 4, seed=9, epoch=1, chunk=5000).tolist()


def test_feistel_shuffle_matrix_exceptions():
    from coded_shuffle.matrix import feistel_shuffle_matrix

    with pytest.raises(ValueError, match=r"Argument 'N' must be at most 2\*\*53"):
        feistel_shuffle_matrix(2**53 + 1, 4, 4, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'K_t1'"):
        feistel_shuffle_matrix(10, 4, 0, seed=0, epoch=0)


def test_read_shuffle_matrix_formats(tmp_path):
    import io

    S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]  # Example 1 of Attia and Tandon (2016)
    for text in ("[[2, 1, 2], [2, 1, 2], [1, 3, 1]]", "a;b;c\n2;1;2\n2;1;2\n1;3;1\n", "2 1 2\n2 1 2\n1 3 1"):
        assert read_shuffle_matrix(io.StringIO(text)).tolist() == S
        assert read_shuffle_matrix(io.BytesIO(("\ufeff" + text).encode())).tolist() == S
    f = tmp_path / "grow.json"
    f.write_text("[[2, 0, 1], [0, 2, 1]]")  # K_t = 2 -> K_t1 = 3, as rates() takes it
    for source in (f, str(f)):
        S = read_shuffle_matrix(source)
        assert S.shape == (2, 3) and not S.flags.writeable and S.dtype == np.int64
    assert rates(S).coded == 2 and lower_bound(S).value == 2


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        (
            b"[[1, 2], [3]]",
            ValueError,
            "matrix in '<file>' is not rectangular: row 2 has 1 entries, expected 2",
        ),
        (b"1,2\n3,x\n", ValueError, "matrix in '<file>', line 2, column 2: 'x' is not an integer"),
        (b"[[1, -1]]", ValueError, "row 1, column 2: -1 is negative"),
        (b"[[4503599627370497, 4503599627370496]]", ValueError, "must count at most 2\\*\\*53"),
        (b"\xff\xfe1", ValueError, "is not UTF-8 text"),
        (b"  ", ValueError, "is empty"),
        (b"7", ValueError, "a 1 x 1 matrix is \\[\\[7\\]\\]"),
    ],
)
def test_read_shuffle_matrix_exceptions(content, error, message):
    import io

    class Unnamed(io.BytesIO):
        name = "<file>"

    with pytest.raises(error, match=message):
        read_shuffle_matrix(Unnamed(content))
    with pytest.raises(TypeError, match="Argument 'source' must be a path or a file object, not int"):
        read_shuffle_matrix(3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        read_shuffle_matrix("/nonexistent/S.json")
