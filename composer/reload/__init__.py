"""Hot reload: a manifest followed as its files change, the last good one serving meanwhile.

Above the engine (it loads manifests and builds registries), while ``composer.observe`` is
below it (the engine hands each turn to it), so that neither imports the other in a circle.

```
changes.py    what a manifest was read from, and digests to tell when it changed
watcher.py    ManifestWatcher, WatchedRegistry: reloads that keep the last good manifest
```
"""

from composer.reload.watcher import ManifestWatcher, WatchedRegistry

__all__ = ["ManifestWatcher", "WatchedRegistry"]
