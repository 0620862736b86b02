"""Rebuild the realtime views from the log after Redis lost them.

Realtime views are disposable: everything they hold is in the log at or past the active
generations' cuts. The rebuild drops what is left of them, forgets the speed layer's commit and
checkpoint, and runs the streaming job from the cuts (one dedup window earlier, its dedup state
rebuilt from the window of log before that, to recognise re-sends) until it has caught up with the
log end. The background job then continues from the new checkpoint.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from config.settings import Settings
from config.spark import hadoop_path

if TYPE_CHECKING:
    from speed_layer.job import SpeedJob
from stores.redis import visit_state
from stores.redis.handshake import forget_speed_commits
from stores.redis.teardown import drop_generations, realtime_generations

log = logging.getLogger(__name__)


def rebuild(settings: Settings) -> None:
    from speed_layer.job import SpeedJob

    job = SpeedJob(settings)
    reset(job)
    job.run(available_now=True)


def reset(job: SpeedJob) -> None:
    """Forget the realtime views of every active generation, the speed layer's commit, its
    checkpoint and its visit state: the next start counts from the cuts again."""
    active = job.registry.ensure_hot_copy()
    stale = realtime_generations(job.redis) | set(active)
    dropped = drop_generations(job.redis, stale)
    forget_speed_commits(job.redis)
    _delete_checkpoint(job)
    log.info(
        "rebuilding realtime views of generations %s (dropped %d stale keys of %s)",
        sorted(active),
        dropped,
        sorted(stale),
    )
    visit_state.clear(job.redis, "")


def _delete_checkpoint(job: SpeedJob) -> None:
    fs, path = hadoop_path(job.spark, job.settings.speed_checkpoint_uri)
    if fs.exists(path):
        fs.delete(path, True)
