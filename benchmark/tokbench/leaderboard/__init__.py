"""The leaderboard: tables, notes and plots computed from run records only.

Data flow: ``records`` (read the JSON run records) -> ``aggregate`` (group them
into cells, statistics across seeds) -> ``scores`` (a suite's ladders: family and
overall scores) -> ``views`` (format-neutral tables) ->
``render`` (terminal, Markdown, LaTeX, CSV, JSON, HTML), ``notes`` (protocol and
findings written from the numbers) and ``plots`` (matplotlib) -> ``publish``
(the published folder). Nothing here reads the plugin registry, so the output
depends on the record files alone.
"""
