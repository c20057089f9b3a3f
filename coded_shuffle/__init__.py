"""coded_shuffle: coded data shuffling for distributed training.

The layers, imported in dependency order (a module imports only those above it here):
"""

from .errors import CodedShuffleError, DecodeError, IntegrityError, InvalidPlanError, TransportError
from .orders import Placement, batch_sizes, epoch_permutation, epoch_placement
from .matrix import leftover_matrix, shuffle_matrix
from .plan import DeliveryPlan, Rates, pack_cycles, plan_delivery, plan_from_matrix, rates, verify_plan
from .codec import Cache, Dataset, decode_worker, encode_plan, load_dataset, parse_frame, record_checksums
from .transport import InProcessTransport, Transport
from .engine import RunReport, TransitionReport, run, simulate, transition
from .certificates import certify_plan, gf2_certificate

__version__ = "0.1.0"
