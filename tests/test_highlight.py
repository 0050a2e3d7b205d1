"""Highlighted HTML: everything from the document is escaped (XSS cases), one colour and CSS
class per slot, per-slot toggles, legend, offsets across title and abstract."""

from __future__ import annotations

import html
import re

import pytest

from curation.matching.highlight import (
    css_class,
    render_highlighted,
    render_legend,
    slot_colours,
    visible_spans,
)
from curation.matching.matcher import EntityMatcher, MatchKind, Span
from kb_sources.errors import CurationError
from kb_sources.types import Document, Entity


def span(start: int, end: int, text: str, slot: str = "gene", entity_id: str = "673",
         kind: MatchKind = MatchKind.EXACT) -> Span:
    return Span(start, end, slot, entity_id, kind, 1.0, text)


def tags(html_text: str) -> set[str]:
    """Names of all tags in the HTML."""
    return {m.lower() for m in re.findall(r"<\s*/?\s*([a-zA-Z][\w-]*)", html_text)}


XSS_TITLE = '<script>alert("t")</script> BRAF in melanoma'
XSS_ABSTRACT = 'An <img src=x onerror=alert(1)> and <a href="javascript:x()">BRAF</a> abstract.'


def test_script_and_img_in_untrusted_text_come_out_inert() -> None:
    doc = Document("1", XSS_TITLE, XSS_ABSTRACT)
    spans = EntityMatcher().spans(Entity("BRAF", "gene", "673"), doc, "gene")
    out = render_highlighted(doc.title, doc.abstract, spans)
    assert tags(out) == {"div", "mark"}
    assert "&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt;" in out
    assert "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "onerror=alert" not in out.replace("&lt;img src=x onerror=alert(1)&gt;", "")
    assert out.count("<mark ") == 2


def test_a_span_over_markup_is_escaped_inside_the_mark() -> None:
    title = "<b>x</b>"
    out = render_highlighted(title, "", [span(0, 8, title)])
    assert ">&lt;b&gt;x&lt;/b&gt;</mark>" in out
    assert tags(out) == {"div", "mark"}


def test_hostile_slot_names_and_ids_are_escaped() -> None:
    evil = '"><script>alert(1)</script>'
    out = render_highlighted("BRAF", "", [span(0, 4, "BRAF", slot=evil, entity_id=evil)])
    assert tags(out) == {"div", "mark"}
    assert 'data-slot="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in out
    assert css_class(evil) == "kb-slot-script-alert-1-script"


def test_bad_colour_is_refused_with_a_fix() -> None:
    with pytest.raises(CurationError, match="not a CSS colour literal; use #rgb"):
        render_highlighted("BRAF", "", [span(0, 4, "BRAF")], {"gene": "red;background:url(x)"})
    with pytest.raises(CurationError, match="Colour"):
        render_legend({"gene": "expression(alert(1))"})


def test_one_colour_class_and_data_slot_per_slot() -> None:
    text = "BRAF V600E"
    spans = [span(0, 4, "BRAF"), span(5, 10, "V600E", slot="variant", entity_id="v")]
    colours = {"gene": "#fde68a", "variant": "lightblue"}
    out = render_highlighted(text, "", spans, colours)
    assert ('<mark class="kb-mark kb-slot-gene" data-slot="gene" data-entity="673" '
            'data-kind="exact"') in out
    assert "background-color:#fde68a" in out and "background-color:lightblue" in out
    assert 'class="kb-mark kb-slot-variant" data-slot="variant"' in out


def test_disabled_slots_are_plain_text() -> None:
    spans = [span(0, 4, "BRAF"), span(5, 10, "V600E", slot="variant")]
    out = render_highlighted("BRAF V600E", "", spans, enabled_slots={"variant"})
    assert out.count("<mark ") == 1 and 'data-slot="variant"' in out
    assert ">BRAF <mark" in out
    assert "<mark" not in render_highlighted("BRAF V600E", "", spans, enabled_slots=set())


def test_offsets_across_title_and_abstract() -> None:
    doc = Document("1", "BRAF title", "abstract BRAF")
    assert doc.text[20:24] == "BRAF"
    spans = [span(0, 4, "BRAF"), span(20, 24, "BRAF")]
    out = render_highlighted(doc.title, doc.abstract, spans, {"gene": "gold"})
    title, abstract = re.findall(r'<div class="kb-(?:title|abstract)">(.*?)</div>', out)
    assert title.startswith("<mark") and title.endswith("</mark> title")
    assert abstract.startswith("abstract <mark") and ">BRAF</mark>" in abstract


def test_span_crossing_title_and_abstract_is_split() -> None:
    out = render_highlighted("BRAF mutant", "melanoma", [span(5, 20, "mutant melanoma")])
    assert out.count("<mark ") == 2
    assert ">mutant</mark>" in out and ">melanoma</mark>" in out


def test_abstract_only_document_starts_at_offset_zero() -> None:
    out = render_highlighted("", "BRAF here", [span(0, 4, "BRAF")])
    assert '<div class="kb-abstract"><mark' in out


def test_overlapping_spans_keep_the_longest_leftmost() -> None:
    spans = [span(0, 4, "BRAF"), span(0, 10, "BRAF V600E", slot="variant"),
             span(5, 10, "V600E", slot="variant"), span(20, 30, "outside")]
    kept = visible_spans(spans, None, text_length=12)
    assert [(s.start, s.end) for s in kept] == [(0, 10)]


def test_legend_lists_slots_with_toggle_state() -> None:
    colours = slot_colours(["gene", "variant", "treatment"])
    assert len(set(colours.values())) == 3
    out = render_legend(colours, enabled_slots={"gene"}, labels={"treatment": "<Drug>"})
    assert out.count('class="kb-legend-item') == 3
    assert 'data-slot="gene" data-enabled="true"' in out
    assert 'kb-legend-item kb-slot-variant kb-off" data-slot="variant" data-enabled="false"' in out
    assert "&lt;Drug&gt;" in out and "<Drug>" not in out


def test_palette_repeats_and_missing_slots_get_colours() -> None:
    colours = slot_colours([f"s{i}" for i in range(10)])
    assert colours["s0"] == colours["s8"]
    out = render_highlighted("BRAF", "", [span(0, 4, "BRAF", slot="new")], {"gene": "gold"})
    assert 'data-slot="new"' in out and "background-color:#bfdbfe" in out


# -- an entity in two slots (issue 29 item 1: FGFR1 autophosphorylation) -------------------------
FGFR1_TEXT = "FGFR1 autophosphorylation at Y653 needs FGFR1 kinase activity."
PTM_COLOURS = {"substrate": "#fde68a", "catalyst": "#bfdbfe", "site": "#bbf7d0"}


def fgfr1_spans() -> list[Span]:
    fgfr1 = Entity("FGFR1", "gene", "2260")
    return EntityMatcher().find_spans(
        {"substrate": [fgfr1], "catalyst": [fgfr1], "site": [Entity("Y653", "residue")]},
        FGFR1_TEXT)


def test_entity_in_two_slots_is_marked_in_both() -> None:
    out = render_highlighted("", FGFR1_TEXT, fgfr1_spans(), PTM_COLOURS)
    marks = re.findall(r"<mark [^>]*>[^<]*</mark>", out)
    assert len(marks) == 3 and marks[0] == marks[2]
    first = marks[0]
    assert first.endswith(">FGFR1</mark>")
    assert 'class="kb-mark kb-slot-substrate kb-slot-catalyst kb-multi"' in first
    assert 'data-slot="substrate" data-slots="substrate catalyst" data-entity="2260"' in first
    assert "title=" not in first  # no internal "substrate: 2260 (exact, 1.00)" reaches a curator
    assert ("background-color:#fde68a;background-image:linear-gradient(to bottom,"
            "#fde68a 0% 50%,#bfdbfe 50% 100%)") in first
    assert 'data-slot="site"' in marks[1] and "data-slots" not in marks[1]


def test_two_slot_mark_with_one_slot_switched_off_is_a_plain_mark() -> None:
    out = render_highlighted("", FGFR1_TEXT, fgfr1_spans(), PTM_COLOURS,
                             enabled_slots={"catalyst", "site"})
    assert "kb-multi" not in out and "linear-gradient" not in out
    assert out.count('<mark class="kb-mark kb-slot-catalyst" data-slot="catalyst"') == 2


def test_two_slot_mark_escapes_slot_names_and_ids() -> None:
    evil = '"><script>x</script>'
    spans = [span(0, 4, "BRAF", slot=evil, entity_id=evil), span(0, 4, "BRAF", slot="gene")]
    out = render_highlighted("BRAF <b>", "", spans)
    assert tags(out) == {"div", "mark"} and "&lt;b&gt;" in out
    assert f'data-slots="{html.escape(evil, quote=True)} gene"' in out
    assert "kb-slot-script-x-script kb-slot-gene kb-multi" in out


def test_marks_of_two_slots_give_both_colours_to_the_evidence() -> None:
    from curation.matching.evidence import mark_colours

    out = render_highlighted("", FGFR1_TEXT, fgfr1_spans(), PTM_COLOURS)
    assert mark_colours(out) == PTM_COLOURS


def test_legend_shows_the_shared_slots_swatch() -> None:
    from curation.matching.highlight import shared_slots

    shared = shared_slots(fgfr1_spans())
    assert [set(c) for c in shared] == [{"substrate", "catalyst"}]
    out = render_legend(PTM_COLOURS, shared=shared)
    assert out.count('class="kb-legend-item') == 4
    assert ('<span class="kb-legend-item kb-legend-shared" data-slots="substrate catalyst" '
            'title="one entity in substrate + catalyst" style="background-color:#fde68a;'
            'background-image:linear-gradient(to bottom,#fde68a 0% 50%,#bfdbfe 50% 100%)') in out
    assert ">substrate + catalyst</span>" in out
    assert shared_slots(fgfr1_spans(), enabled_slots={"substrate", "site"}) == []
    assert "kb-legend-shared" not in render_legend(PTM_COLOURS)


# -- tooltips: the entity's name and database links, not "gene: 673" (issue 36 item 10) -------
MARK = re.compile(r"<mark [^>]*>[^<]*</mark>")


def braf_v600e(**kwargs) -> str:
    braf = Entity("BRAF", "gene", "673", ("RAFB1",))  # RAFB1: an alias of BRAF
    spans = EntityMatcher().find_spans(
        {"gene": [braf], "variant": [Entity("V600E", "variant")]}, "RAFB1 V600E in melanoma")
    return render_highlighted("", "RAFB1 V600E in melanoma", spans,
                              {"gene": "gold", "variant": "lightblue"}, tips=True, **kwargs)


def test_tooltip_names_the_entity_and_links_ncbi_gene_not_the_internal_id() -> None:
    out = braf_v600e()
    assert "gene: 673" not in out and "title=" not in out and "1.00" not in out
    first = out.index('<span class="kb-ent" tabindex="0"><mark ')
    gene_tip = out[first:out.index("</span></span></span>", first)]
    assert ">RAFB1</mark>" in gene_tip  # the text as written, the name in the tooltip
    assert '<b class="kb-tip-name">BRAF</b>' in gene_tip
    assert '<span class="kb-tip-what">gene</span>' in gene_tip
    assert '<span class="kb-tip-how">matched by a synonym</span>' in gene_tip
    assert ('<a href="https://www.ncbi.nlm.nih.gov/gene/673" target="_blank" '
            'rel="noopener noreferrer">NCBI Gene 673</a>') in gene_tip
    # the marks still hold text only, so every parser of <mark> tags keeps working
    assert [m.rsplit(">", 2)[-2][:-6] for m in MARK.findall(out)] == ["RAFB1", "V600E"]
    assert out.count('tabindex="0"') == 2 and out.count('role="tooltip"') == 2
    assert tags(out) == {"div", "mark", "span", "b", "a"}


def test_an_entity_without_an_id_gets_its_kb_record_links() -> None:
    from curation.matching.entity_links import Link

    civic = Link("CIViC EID1425", "https://civicdb.org/evidence/1425/summary")
    out = braf_v600e(record_links={"variant:v600e": [civic],
                                   "variant:other": [Link("x", "https://x.example/")]})
    variant = out[out.index('data-slot="variant"'):]
    assert '<b class="kb-tip-name">V600E</b>' in variant
    assert ('<a href="https://civicdb.org/evidence/1425/summary" target="_blank" '
            'rel="noopener noreferrer">CIViC EID1425</a>') in variant
    assert "x.example" not in out
    plain = braf_v600e()
    assert "no database link for this entity" in plain[plain.index('data-slot="variant"'):]


def test_many_kb_records_are_capped_and_counted() -> None:
    from curation.matching.entity_links import Link
    from curation.matching.tooltips import MAX_RECORD_LINKS

    records = [Link(f"CIViC EID{i}", f"https://civicdb.org/evidence/{i}/summary")
               for i in range(1, 8)]
    out = braf_v600e(record_links={"variant:v600e": records})
    variant = out[out.index('data-slot="variant"'):]
    assert MAX_RECORD_LINKS == 4 and variant.count("civicdb.org/evidence/") == 4
    assert ('<span class="kb-tip-records"><span class="kb-tip-label">KB records:</span> '
            '<a href="https://civicdb.org/evidence/1/summary"') in variant
    assert '<span class="kb-tip-more">and 3 more</span>' in variant
    assert "kb-tip-none" not in variant


def test_record_links_that_are_not_https_are_dropped() -> None:
    from curation.matching.entity_links import Link

    out = braf_v600e(record_links={"variant:v600e": [Link("bad", "javascript:alert(1)"),
                                                     Link("ok", "https://civicdb.org/x")]})
    assert "javascript:" not in out and 'href="https://civicdb.org/x"' in out


def test_a_hostile_entity_name_type_and_slot_are_escaped_in_the_tooltip() -> None:
    evil = '<img src=x onerror=alert(1)>"'
    hostile = Span(0, 4, evil, '673"><script>', MatchKind.EXACT, 1.0, "BRAF", evil, evil)
    out = render_highlighted("BRAF", "", [hostile], tips=True)
    assert tags(out) == {"div", "mark", "span", "b"}  # no link from an id that fails its pattern
    assert "<img" not in out and "<script" not in out
    assert '<b class="kb-tip-name">&lt;img src=x onerror=alert(1)&gt;&quot;</b>' in out
    assert MARK.findall(out) and MARK.findall(out)[0].endswith(">BRAF</mark>")


def test_an_entity_in_two_slots_has_one_tooltip_entry() -> None:
    out = render_highlighted("", FGFR1_TEXT, fgfr1_spans(), PTM_COLOURS, tips=True)
    first = out[:out.index("</span></span></span>")]
    assert first.count('class="kb-tip-entity"') == 1
    assert '<span class="kb-tip-what">substrate and catalyst (gene)</span>' in first
    assert 'href="https://www.ncbi.nlm.nih.gov/gene/2260"' in first
    assert '<b class="kb-tip-name">Y653</b>' in out


def test_without_tips_the_marks_stand_alone() -> None:
    out = render_highlighted("BRAF", "", [span(0, 4, "BRAF")])
    assert "kb-tip" not in out and "kb-ent" not in out and tags(out) == {"div", "mark"}


def test_only_an_entitys_first_mark_is_a_tab_stop() -> None:
    """Every mention keeps its tooltip (hover), but keyboard focus stops once per entity: a
    list of 50 cards is not a Tab stop per mention."""
    braf = Entity("BRAF", "gene", "673")
    title, abstract = "BRAF in melanoma", "BRAF V600E and BRAF fusions; V600E again."
    spans = EntityMatcher().find_spans({"gene": [braf], "variant": [Entity("V600E", "variant")]},
                                       f"{title} {abstract}")
    out = render_highlighted(title, abstract, spans, {"gene": "gold", "variant": "lightblue"},
                             tips=True)
    assert len(MARK.findall(out)) == out.count('role="tooltip"') == 5
    assert out.count('tabindex="0"') == 2  # BRAF (in the title) and V600E
    assert out.index('tabindex="0"') < out.index('<div class="kb-abstract">')
    plain = render_highlighted(title, abstract, spans)
    assert "tabindex" not in plain and "kb-tip" not in plain
