"""The leaderboard: tables, notes and plots computed from run records only.

Data flow: ``records`` (read the JSON run records) -> ``aggregate`` (group them
into cells, statistics across seeds) -> ``scale`` (each run's score between chance
and the oracle, and which accuracy is scored: final, at a budget, at an extra
evaluation) -> ``scores`` (a suite's ladders: family and overall scores), with
``budgets`` (scores by training budget, rank stability) and ``lengths`` (length
generalisation) -> ``report`` (one object per section holding all of it, computed
once) -> ``views`` (format-neutral tables) and ``document`` (blocks) -> ``render``
(terminal, Markdown, LaTeX, CSV, JSON, HTML), ``notes`` (protocol and findings
written from the numbers) and ``plots`` (matplotlib) -> ``publish`` (the published
folder). Renderers only render a report. Nothing here reads the plugin registry, so
the output depends on the record files alone.
"""
