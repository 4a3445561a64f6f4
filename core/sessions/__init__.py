"""Sessions: the one driver of the executor for every way of watching.

A session (session.py) is sources -> (merged) source -> executor -> per-source stages
(source_stages.py) -> a consumer. The consumers: runs into files (runs.py; several
devices in processes: processes.py), archives (archive/), the video wall (wall.py) and
playback (playback/)."""
