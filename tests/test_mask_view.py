"""The coloured reply: each token on the colour of who chose it, escaped, with inline styles only."""
import re

from helpers.mask_view import COLOURS, forced_after, mask_page, who_chose

TRACE = [{"token": '{"', "allowed": 1}, {"token": "note", "allowed": 1}, {"token": ' <b>&', "allowed": 47_900},
         {"token": "click", "allowed": 24}]


def test_a_token_is_the_grammars_only_where_it_was_the_one_allowed():
    assert [who_chose(step) for step in TRACE] == ["grammar", "grammar", "model", "model"]


def test_what_the_grammar_forced_after_a_choice_runs_to_the_next_choice():
    trace = [{"token": "go", "allowed": 24}, {"token": "_back", "allowed": 1}, {"token": '"}}', "allowed": 1},
             {"token": " ", "allowed": 2}, {"token": "x", "allowed": 1}]
    assert [forced_after(trace, i) for i in range(len(trace))] == ['_back"}}', '"}}', "", "x", ""]


def test_every_token_appears_once_on_its_colour_and_the_text_is_escaped():
    page = mask_page(TRACE).split("<details>")[0]  # the reply; every token's row follows, folded
    tokens = re.findall(r'<span style="background:(#\w+);[^"]*" title="([^"]*)">(.*?)</span>', page)
    assert [(colour, text) for colour, _, text in tokens] == [
        (COLOURS["grammar"], "{&quot;"), (COLOURS["grammar"], "note"), (COLOURS["model"], " &lt;b&gt;&amp;"),
        (COLOURS["model"], "click")]
    assert tokens[2][1] == "47,900 allowed"


def test_the_page_has_a_legend_and_no_stylesheet_or_script():
    page = mask_page(TRACE)
    assert "forced by the grammar" in page and "chosen by the model" in page
    assert "<style" not in page and "<script" not in page and "class=" not in page
