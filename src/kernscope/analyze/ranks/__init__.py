"""Many ranks: per-rank summaries (worker side, small tables) and the job across ranks (client side)."""

from ..idle import KERNEL_WAIT_US
from .job import Failure, JobAnalysis, combine
from .summary import METRICS, RankResult, rank_of, summarize_rank
from .worker import RankTask, summarize_file

__all__ = ["Failure", "JobAnalysis", "combine", "KERNEL_WAIT_US", "METRICS", "RankResult", "rank_of", "summarize_rank",
           "RankTask", "summarize_file"]
