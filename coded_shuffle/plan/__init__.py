"""Delivery plans: order-2 symbols for pairs of workers, then leftovers combined along cycles.

Notation
--------
==============  =====================================================================
``S``           shuffle matrix, ``S[i][j]`` points held by ``i`` and needed by ``j``
``W``           uncoded load, the off-diagonal sum of ``S``
``P``           order-2 symbols, ``sum_{i<j} min(S_ij, S_ji)``
``Omega``       leftover matrix (:func:`coded_shuffle.matrix.leftover_matrix`)
cycle           workers ``w_1 -> w_2 -> ... -> w_l -> w_1`` with ``Omega[w_k][w_{k+1}] > 0``
==============  =====================================================================

A cycle carries one leftover point ``m_k`` per edge (held by ``w_k``, needed by ``w_{k+1}``)
in the ``l - 1`` symbols ``m_1 + m_2, ..., m_{l-1} + m_l``; worker ``w_{k+1}`` reads ``m_k`` off
symbol ``k`` and worker ``w_1`` peels the chain to reach ``m_l``. Each cycle saves one symbol:

    uncoded = W,   paired = W - P,   coded = W - P - (cycles used).

Leftovers that no cycle covers (possible only when batches are unequal, so that conservation
fails) are sent uncoded; :class:`Rates` says how many.

Sub-packets (``subpackets=q``): every record is cut into ``q`` equal pieces and the scheme runs
on the pieces, whose shuffle matrix is ``q S``. The order-2 phase pairs pieces exactly as it
pairs records (``q P`` piece symbols), the leftovers become ``q Omega``, and each cycle packed in
``q Omega`` saves one piece. In records, with ``n`` the cycles of ``q Omega``:

    coded = W - P - n / q,

a :class:`fractions.Fraction` when ``q > 1``. Since ``n / q`` is at most the fractional cycle
packing of ``Omega``, this can beat the integral scheme (``proofs/claim_5_optimality.py``).
Piece ``k`` of point ``p`` is numbered ``p * q + k`` in a sub-packet plan.

Strategies choose the cycles, by name through :data:`STRATEGIES`:

``greedy``
    shortest cycles first: repeatedly take a cycle of the smallest length present in the support
    of what is left, as many times as its lightest edge allows.
``lp``
    the fractional cycle packing (the linear program of ``exact``'s step 2, in at most
    :data:`~coded_shuffle.plan.lp.LP_ROUNDS` rounds of column generation) rounded, and what it
    leaves packed by ``greedy`` so that no cycle is left; never worse than ``greedy``, with the
    program's bound (:mod:`.lp`).
``exact``
    a maximum cycle packing, proven when it can be, within :data:`EXACT_NODE_LIMIT` nodes of
    branch and bound an integer program (a count of work: the same input gives the same packing
    whatever the machine's load):

    1. greedy; if it meets the counting bound (every cycle has at least 3 edges: no 2-cycles
       are left after the order-2 phase) nothing else runs;
    2. the fractional packing, a linear program over cycles (HiGHS, ``scipy.optimize.linprog``)
       solved by column generation: it starts from every 2- and 3-cycle and adds the shortest
       cycle under the dual prices through each edge whose cycles cost less than one. Its
       value, bounded from the dual prices so that solver tolerances cannot inflate it, rounded
       down, is an upper bound on every packing;
    3. a packing by rounding the fractional one (whole parts fixed, then the largest fractions
       rounded up, the fractional packing of what is left solved again) and the integer program
       over every cycle listed (``scipy.optimize.milp``); a packing that meets the bound of 2. is
       proven optimal;
    4. below that bound, an integer program that lists no cycle: workers are ranked, and each
       worker ``r`` roots one integer circulation on the workers ranked after it; the
       circulations share the leftover edges and the objective counts the flow leaving each
       root, so every cycle is counted once, at its first-ranked worker, and each circulation
       is split into simple cycles. It can prove a packing optimal below the bound.

    Every packing is checked. When time runs out first, the best packing found is kept, or
    greedy's if that is better, and :attr:`CyclePacking.note` says so with the best bound; a
    program of more than :data:`EXACT_MAX_VARIABLES` columns or variables is not built
    (greedy's packing, with a note). It is never worse than ``greedy``.

Reference: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823 (Example 1: uncoded 11, paired 7, coded 6).

Layout
------
:mod:`.delivery` (the loads and the point-level plan, the strategies by name), :mod:`.packing`
(a cycle packing and its checker), :mod:`.greedy`, :mod:`.lp` and :mod:`.exact` (the strategies),
:mod:`.exchange` (the peers' exchange: its senders) and :mod:`.rounds` (its rounds), :mod:`.verify`
(checks of a plan).
"""

from __future__ import annotations

from .delivery import (
    PLAN_MAX_POINTS,
    STRATEGIES,
    DeliveryPlan,
    Rates,
    pack_cycles,
    plan_delivery,
    plan_from_matrix,
    rates,
)
from .exact import EXACT_MAX_VARIABLES, EXACT_NODE_LIMIT
from .exchange import (
    EXCHANGE_MAX_K,
    SenderAssignment,
    assign_senders,
    holder_set,
    holder_words,
    lone_holders,
    upload_bound,
)
from .exchange_racks import assign_senders_racks, rack_link_loads
from .greedy import PROGRESS_MIN_LEFTOVERS
from .packing import CyclePacking, is_cycle_packing
from .rounds import ROUND_MERGE_FRACTION, exchange_rounds, is_round_schedule
from .verify import decoding_steps, verify_plan

__all__ = [
    "STRATEGIES",
    "EXCHANGE_MAX_K",
    "EXACT_NODE_LIMIT",
    "PROGRESS_MIN_LEFTOVERS",
    "EXACT_MAX_VARIABLES",
    "PLAN_MAX_POINTS",
    "CyclePacking",
    "Rates",
    "DeliveryPlan",
    "pack_cycles",
    "is_cycle_packing",
    "rates",
    "plan_delivery",
    "plan_from_matrix",
    "verify_plan",
    "decoding_steps",
    "SenderAssignment",
    "assign_senders",
    "upload_bound",
    "ROUND_MERGE_FRACTION",
    "exchange_rounds",
    "is_round_schedule",
    "assign_senders_racks",
    "holder_set",
    "holder_words",
    "lone_holders",
    "rack_link_loads",
]
