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

from config.spark import hadoop_path
from stores.redis import visit_state
from stores.redis.handshake import forget_speed_commits
from stores.redis.teardown import drop_generations, realtime_generations

if TYPE_CHECKING:
    from generations.registry import GenerationRegistry
    from speed_layer.context import SpeedContext

log = logging.getLogger(__name__)


def reset(registry: GenerationRegistry, context: SpeedContext) -> None:
    """Forget the realtime views of every active generation, the speed layer's commit, its
    checkpoint and its visit state: the next start counts from the cuts again (the job runs the
    rebuild: speed_layer.job.SpeedJob.rebuild)."""
    active = registry.ensure_hot_copy()
    stale = realtime_generations(context.redis) | set(active)
    dropped = drop_generations(context.redis, stale)
    forget_speed_commits(context.redis)
    _delete_checkpoint(context)
    log.info(
        "rebuilding realtime views of generations %s (dropped %d stale keys of %s)",
        sorted(active),
        dropped,
        sorted(stale),
    )
    visit_state.clear(context.redis, "")


def _delete_checkpoint(context: SpeedContext) -> None:
    fs, path = hadoop_path(context.spark, context.settings.speed_checkpoint_uri)
    if fs.exists(path):
        fs.delete(path, True)
