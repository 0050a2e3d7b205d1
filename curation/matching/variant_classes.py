"""Variant classes and exon-level changes as the words papers use (pure data and lookups).

A KB records a class of variants ("AMPLIFICATION", "LOSS-OF-FUNCTION", "ALK FUSIONS") or an exon
change ("EXON 19 DELETION") where papers write "amplified", "loss-of-function", "rearranged",
"ex19del": :func:`class_forms` and :func:`exon_forms` give those words for a search query
(:mod:`curation.matching.notations`). A class that is in most abstracts naming the gene
("EXPRESSION") has no words: searching it would only add noise.
"""

from __future__ import annotations

import re

from curation.matching.variants import variant_keys

#: Variant classes (text folded: lower case, hyphens as spaces) -> the forms a curator searches;
#: ``{gene}`` is the gene slot's symbol. An empty tuple: the class is dropped (noise).
CLASS_FORMS: dict[str, tuple[str, ...]] = {
    "mutation": ("mutation", "mutations", "mutated", "mutant"),
    "amplification": ("amplification", "amplifications", "amplified", "copy number gain"),
    "overexpression": ("overexpression", "overexpressed", "over-expression", "high expression"),
    "underexpression": ("underexpression", "underexpressed", "low expression",
                        "loss of expression"),
    "expression": (),
    "loss": ("loss", "deletion", "deleted", "deficient", "deficiency", "inactivation"),
    "deletion": ("deletion", "deletions", "deleted"),
    "loss of function": ("loss of function", "loss-of-function", "inactivating",
                         "inactivation", "truncating"),
    "gain of function": ("gain of function", "gain-of-function", "activating"),
    "activating mutation": ("activating mutation", "activating mutations", "gain of function"),
    "deleterious mutation": ("deleterious mutation", "deleterious mutations",
                             "pathogenic mutation", "pathogenic mutations"),
    "wild type": ("wild type", "wild-type", "wildtype"),
    "fusion": ("fusion", "fusions", "rearrangement", "rearrangements", "rearranged",
               "translocation"),
    "itd": ("ITD", "{gene}-ITD", "internal tandem duplication", "internal tandem duplications"),
    "viii": ("{gene}vIII", "{gene} vIII", "vIII", "variant III"),
    "kinase domain mutation": ("tyrosine kinase domain", "kinase domain", "TKD"),
    "methylation": ("methylation", "methylated", "hypermethylation", "hypermethylated"),
    "phosphorylation": ("phosphorylation", "phosphorylated"),
    "truncating mutation": ("truncating", "truncation", "frameshift", "frame-shift", "nonsense"),
    "copy number variation": ("copy number", "copy-number", "CNV"),
    "loh": ("LOH", "loss of heterozygosity"),
    "biallelic inactivation": ("biallelic", "bi-allelic"),
    "nuclear expression": ("nuclear expression", "nuclear staining", "nuclear localization"),
    "nuclear translocation": ("nuclear translocation", "nuclear localization"),
    "serum level": ("serum level", "serum levels", "serum concentration",
                    "serum concentrations"),
}
#: Other spellings of the classes above (folded) -> the class.
CLASS_ALIASES: dict[str, str] = {
    "mut": "mutation", "mutant": "mutation", "mutated": "mutation", "alteration": "mutation",
    "oncogenic mutation": "mutation", "any mutation": "mutation", "amp": "amplification",
    "amplified": "amplification", "over expression": "overexpression",
    "under expression": "underexpression", "lof": "loss of function",
    "gof": "gain of function", "wildtype": "wild type", "wt": "wild type",
    "rearrangement": "fusion", "translocation": "fusion", "fusion gene": "fusion",
    "tkd mutation": "kinase domain mutation", "kinase domain": "kinase domain mutation",
    "promoter methylation": "methylation", "promoter hypermethylation": "methylation",
    "hypermethylation": "methylation", "frameshift": "truncating mutation",
    "frameshift mutation": "truncating mutation", "frameshift truncation": "truncating mutation",
    "truncation": "truncating mutation", "nonsense": "truncating mutation",
    "nonsense mutation": "truncating mutation", "cnv": "copy number variation",
    "copy number alteration": "copy number variation", "deleted": "deletion",
    "egfrviii": "viii", "variant iii": "viii", "internal tandem duplication": "itd",
    "loss of heterozygosity": "loh", "copy neutral loss of heterozygosity": "loh",
}
#: Exon change kind -> forms ({n}: the exon number, {gene}: the gene symbol).
EXON_FORMS: dict[str, tuple[str, ...]] = {
    "del": ("exon {n} deletion", "exon {n} deletions", "exon {n} del", "ex{n}del", "exon{n}del",
            "del{n}"),
    "ins": ("exon {n} insertion", "exon {n} insertions", "exon {n} ins", "ex{n}ins",
            "exon{n}ins"),
    "dup": ("exon {n} duplication", "exon {n} duplications", "exon {n} dup"),
    "skip": ("exon {n} skipping", "exon{n} skipping", "{gene}ex{n}", "{gene} ex{n}"),
    "mut": ("exon {n}", "exon{n}"),
}


def fold_class(text: str) -> str:
    """A class name folded for :data:`CLASS_FORMS`: lower case, hyphens as spaces, no plural."""
    folded = " ".join(re.sub(r"[-_]+", " ", text.lower()).split())
    for candidate in (folded, folded[:-1] if folded.endswith("s") else folded):
        candidate = CLASS_ALIASES.get(candidate, candidate)
        if candidate in CLASS_FORMS:
            return candidate
    return folded


def class_forms(text: str, gene: str = "") -> tuple[str, ...] | None:
    """Forms of a variant class ("AMPLIFICATION" -> amplification, amplified, ...); ``()`` for a
    class dropped as noise, None when ``text`` is no class. Forms naming ``{gene}`` need it."""
    key = fold_class(text)
    if key not in CLASS_FORMS:
        return None
    return tuple(f.format(gene=gene) for f in CLASS_FORMS[key] if gene or "{gene}" not in f)


def exon_forms(text: str, gene: str = "") -> tuple[str, ...] | None:
    """Forms of an exon-level change ("EXON 19 DELETION" -> "exon 19 deletion", "ex19del", ...),
    else None."""
    keys = variant_keys(text)
    if len(keys) != 1:
        return None
    m = re.fullmatch(r"exon(\d+):(\w+)", next(iter(keys)))
    if not m:
        return None
    return tuple(f.format(n=m[1], gene=gene) for f in EXON_FORMS[m[2]]
                 if gene or "{gene}" not in f)
