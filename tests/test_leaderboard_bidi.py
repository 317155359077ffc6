"""A plugin's text with bidirectional controls cannot reorder what the HTML page shows after it."""
from __future__ import annotations

from tokbench.leaderboard import render
from tokbench.leaderboard.document import Paragraph


def test_bidirectional_controls_are_written_out_visibly_in_html():
    text = "evil\u202etxt.exe \u2066x\u2069 <b>"
    escaped = render._escape(text)
    assert not render._BIDI.search(escaped)
    assert escaped == "evil[U+202E]txt.exe [U+2066]x[U+2069] &lt;b&gt;"
    (paragraph,) = render._html_blocks([Paragraph(text)])
    assert "[U+202E]" in paragraph and "\u202e" not in paragraph
