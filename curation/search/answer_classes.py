"""Which answer candidates name a class or a generic therapy rather than one answer.

"BRAF Inhibitor", "Chemotherapy" or "EGFR TKIs" are not a treatment a curator can add as NEW:
they name a kind of drug or of therapy. CIViC itself stores such names (its NCI-thesaurus
therapies include "BRAF Inhibitor", "Chemotherapy", "Radiation Therapy", "Platinum Compound"),
so a KB answer is no proof of a specific drug. The suggestions panel shows these candidates marked
as a class, never flagged NEW (:mod:`curation.search.candidates`).

Rules for a therapy slot (answer types :data:`THERAPY_TYPES`), on the name with case, hyphens and
spaces folded ("EGFR-TKIs" is "egfr tkis"):

* a whole name of :data:`GENERIC_THERAPIES` ("chemotherapy", "immunotherapy", "radiotherapy",
  "surgery", "targeted therapy" ...) is a generic therapy, and so is a name whose last word is a
  therapy word of :data:`THERAPY_WORDS` ("Adjuvant Chemotherapy", "platinum-based
  chemotherapy", "Hormone Therapy", "Radiation Therapy");
* a name whose last word is a class noun of :data:`CLASS_WORDS` ("BRAF Inhibitor", "kinase
  inhibitors", "Anti-EGFR Monoclonal Antibody", "EGFR TKI", "Platinum Compound", "alkylating
  agents") is a drug class. CIViC names a specific compound by its class followed by the
  compound ("MEK Inhibitor PD0325901", "NOTCH1 Antibody (PF-06293622)"): the class word is then
  not last, so the name is specific, as is "<code> Compound" ("JQ1 Compound");
* "anti-<target>" alone ("Anti-CD33", "anti-PD-1") and any "<x>-based ..." name are classes.

For a gene slot (:data:`GENE_TYPES`: the PTM catalyst, disease_gene's gene) a name is a class of
proteins, not one gene, when it is (name folded as above):

* a plural enzyme word or "family" last ("MAP kinases", "Src family"; :data:`GENE_CLASS_WORDS`);
* a gene family or protein class named without a member (:data:`GENE_FAMILIES`): a family's
  symbol stem or word ("ALDH", "claudin", "MMP", "HDAC", "caspase", "interleukin") or a receptor
  class ("estrogen receptor", "toll-like receptor", "GPCR"); a member ("ALDH1A1", "claudin-4",
  "estrogen receptor alpha") is specific. "androgen receptor" or "EGF receptor" name one gene
  each (AR, EGFR) and are not listed;
* a plural family name: the plural of a :data:`GENE_FAMILIES` name ("claudins", "estrogen
  receptors"), a symbol in capitals with a plural "s" ("MMPs", "HDACs", "TLRs"), or a plural
  protein noun (:data:`PROTEIN_NOUN_ENDS`: "integrins", "caspases", "receptors", "cytokines").

For a disease slot (:data:`DISEASE_TYPES`: variant_disease's disease) a name is a class of
diseases, not one disease, when every word (folded, singular) is a generic disease word of
:data:`GENERIC_DISEASES` ("cancer", "tumor", "malignancies", "disease", "death") or a modifier
of :data:`GENERIC_DISEASE_MODIFIERS` ("human", "advanced", "solid") and the last is a generic
disease word: "malignancies", "solid tumours", "advanced cancer", "death" are classes;
"lung cancer", "melanoma", "GEP-NETs" are specific (:func:`is_generic_disease`).

Any other name, and any name of another slot type, is specific.
"""

from __future__ import annotations

import re
from enum import StrEnum

#: Answer-slot types that hold therapies.
THERAPY_TYPES = frozenset({"drug", "chemical", "treatment", "therapy"})
#: Answer-slot types that hold genes or proteins.
GENE_TYPES = frozenset({"gene", "protein"})
#: Answer-slot types that hold diseases.
DISEASE_TYPES = frozenset({"disease", "phenotype"})
#: Words (folded, singular) that name a class of diseases or an outcome, never one disease.
GENERIC_DISEASES = frozenset({
    "cancer", "tumor", "tumour", "neoplasm", "neoplasia", "malignancy", "carcinoma",
    "metastasis", "metastase", "lesion", "disease", "disorder", "syndrome", "illness",
    "condition", "death", "mortality", "morbidity", "tumorigenesis", "carcinogenesis",
    "oncogenesis", "toxicity", "injury", "damage", "infection", "inflammation"})
#: Words (folded, singular) that qualify a generic disease word without naming a disease.
GENERIC_DISEASE_MODIFIERS = frozenset({
    "human", "malignant", "benign", "solid", "advanced", "metastatic", "primary", "secondary",
    "recurrent", "refractory", "relapsed", "aggressive", "invasive", "other", "various",
    "several", "many", "multiple", "common", "rare", "late", "early", "stage", "neoplastic",
    "oncogenic", "all", "some", "most", "such", "these", "those", "mutant", "mutated",
    "positive", "negative", "resistant", "sensitive", "driven"})
#: Whole therapy names (folded) that name a kind of treatment, not one.
GENERIC_THERAPIES = frozenset({
    "chemotherapy", "immunotherapy", "radiotherapy", "radiation", "irradiation",
    "chemoradiotherapy", "chemoradiation", "surgery", "resection", "transplantation",
    "stem cell transplantation", "targeted therapy", "hormone therapy", "hormonal therapy",
    "endocrine therapy", "standard of care", "best supportive care", "supportive care",
    "placebo", "treatment", "therapy", "drug", "drugs", "medication", "tki", "tkis",
    "checkpoint blockade", "immune checkpoint blockade"})
#: Last words (folded, singular) that make a therapy name a generic therapy.
THERAPY_WORDS = frozenset({
    "therapy", "chemotherapy", "immunotherapy", "radiotherapy", "chemoradiotherapy",
    "radiation", "surgery", "treatment", "transplantation", "transplant", "blockade",
    "lymphocyte"})
#: Last words (folded, singular) that make a therapy name a drug class.
CLASS_WORDS = frozenset({
    "inhibitor", "antagonist", "agonist", "blocker", "antibody", "compound",
    "agent", "drug", "tki", "analog", "analogue", "derivative", "modulator", "degrader",
    "antimetabolite", "anthracycline", "taxane", "platinum", "steroid", "corticosteroid",
    "antibiotic", "oligonucleotide"})
#: Last words (folded) of a gene-slot name that make it a class of proteins.
GENE_CLASS_WORDS = frozenset({
    "kinases", "phosphatases", "ligases", "family", "families", "superfamily", "isoforms",
    "isozymes", "paralogs", "members", "subunits", "homologs", "homologues", "orthologs"})
#: Gene families and protein classes (folded, singular) named without a member: each names
#: several genes ("ALDH": ALDH1A1, ALDH2 ...; "estrogen receptor": ESR1 and ESR2).
GENE_FAMILIES = frozenset({
    # symbol stems and family words
    "aldh", "aldehyde dehydrogenase", "claudin", "cldn", "mmp", "matrix metalloproteinase",
    "metalloproteinase", "hdac", "histone deacetylase", "sirtuin", "sirt", "caspase", "cyclin",
    "cdk", "cyclin dependent kinase", "integrin", "cadherin", "keratin", "cytokeratin",
    "collagen", "annexin", "galectin", "cathepsin", "kallikrein", "serpin", "aquaporin", "aqp",
    "connexin", "defensin", "mucin", "muc", "histone", "tubulin", "interleukin", "il",
    "interferon", "ifn", "chemokine", "cytokine", "sox", "fox", "hox", "klf", "smad", "stat",
    "jak", "wnt", "notch", "adam", "bmp", "fgf", "pdgf", "ephrin", "semaphorin", "hsp",
    "heat shock protein", "cyp", "cytochrome p450", "ugt", "gst", "glutathione s transferase",
    "slc", "abc transporter", "ras", "raf", "erk", "jnk", "mapk", "map kinase",
    "mitogen activated protein kinase", "pkc", "protein kinase c", "pka", "protein kinase a",
    "pi3k", "phosphoinositide 3 kinase", "phosphatidylinositol 3 kinase", "ampk", "nf kappab",
    "nf kb", "nfkb", "nf κb", "ap 1", "e2f", "erbb", "ubiquitin ligase", "e3 ligase",
    "e3 ubiquitin ligase", "deubiquitinase", "polymerase", "dna polymerase", "rna polymerase",
    "kinase", "phosphatase", "protease", "protein",
    "enzyme", "gene", "oncogene", "tumor suppressor", "tumour suppressor",
    "transcription factor", "growth factor", "hormone", "receptor", "transporter", "channel",
    "ion channel", "tyrosine kinase", "receptor tyrosine kinase", "rtk", "protein kinase",
    "serine threonine kinase",
    # receptor classes
    "estrogen receptor", "oestrogen receptor", "hormone receptor", "steroid receptor",
    "steroid hormone receptor", "nuclear receptor", "retinoic acid receptor",
    "retinoid x receptor", "thyroid hormone receptor",
    "peroxisome proliferator activated receptor", "ppar", "toll like receptor", "tlr",
    "glutamate receptor", "nmda receptor", "ampa receptor", "gaba receptor", "gabaa receptor",
    "dopamine receptor", "serotonin receptor", "5 ht receptor", "adrenergic receptor",
    "adrenoceptor", "muscarinic receptor", "acetylcholine receptor",
    "nicotinic acetylcholine receptor", "opioid receptor", "cannabinoid receptor",
    "histamine receptor", "adenosine receptor", "purinergic receptor", "chemokine receptor",
    "cytokine receptor", "interleukin receptor", "interferon receptor", "fgf receptor", "fgfr",
    "vegf receptor", "vegfr", "pdgf receptor", "pdgfr", "erbb receptor", "ephrin receptor",
    "eph receptor", "g protein coupled receptor", "gpcr", "ionotropic receptor",
    "pattern recognition receptor", "scavenger receptor"})
#: Singular ends of protein nouns: the plural of such a word last names a class ("integrins",
#: "caspases", "receptors", "cytokines", "collagens", "transporters").
PROTEIN_NOUN_ENDS = ("in", "ase", "or", "er", "en", "on", "ine", "ide", "gene")
#: A gene symbol in capitals with a plural "s": "MMPs", "HDACs", "TLRs", "ERs".
_PLURAL_SYMBOL = re.compile(r"^[A-Z][A-Z0-9]*[A-Z0-9]s$")
_FOLD = re.compile(r"[\s\-_/]+")
_ANTI = re.compile(r"^anti \S+$")
_BASED = re.compile(r"\S based\b")


class AnswerKind(StrEnum):
    """What an answer candidate names."""

    SPECIFIC = "specific"
    CLASS = "class"
    GENERIC_THERAPY = "generic therapy"

    @property
    def generic(self) -> bool:
        """A class or generic therapy: shown, never a NEW answer."""
        return self is not AnswerKind.SPECIFIC


def fold(name: str) -> str:
    """Lower case, hyphens / slashes / underscores as spaces, spaces collapsed."""
    return _FOLD.sub(" ", name.strip().lower()).strip()


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


def answer_kind(name: str, slot_type: str) -> AnswerKind:
    """The kind of answer ``name`` is for an answer slot of type ``slot_type`` (rules: module
    docstring).

    Example:
        >>> answer_kind("BRAF Inhibitor", "drug"), answer_kind("MEK Inhibitor PD0325901", "drug")
        (<AnswerKind.CLASS: 'class'>, <AnswerKind.SPECIFIC: 'specific'>)
    """
    folded = fold(name)
    words = folded.split()
    if not words:
        return AnswerKind.SPECIFIC
    if slot_type in GENE_TYPES:
        return AnswerKind.CLASS if is_gene_class(name) else AnswerKind.SPECIFIC
    if slot_type in DISEASE_TYPES:
        return AnswerKind.CLASS if is_generic_disease(name) else AnswerKind.SPECIFIC
    if slot_type not in THERAPY_TYPES:
        return AnswerKind.SPECIFIC
    last = _singular(words[-1])
    if folded in GENERIC_THERAPIES or last in THERAPY_WORDS:
        return AnswerKind.GENERIC_THERAPY
    if last == "compound" and len(words) > 1 and any(c.isdigit() for c in words[-2]):
        return AnswerKind.SPECIFIC  # "JQ1 Compound": a compound's code, not a class
    if last in CLASS_WORDS or _ANTI.match(folded) or _BASED.search(folded):
        return AnswerKind.CLASS
    return AnswerKind.SPECIFIC


def is_gene_class(name: str) -> bool:
    """Whether a gene-slot name names a class of proteins or a gene family, not one gene
    (rules: module docstring).

    Example:
        >>> [is_gene_class(n) for n in ("ALDH", "claudins", "estrogen receptor", "ALDH1A1")]
        [True, True, True, False]
    """
    folded = fold(name)
    words = folded.split()
    if not words:
        return False
    if words[-1] in GENE_CLASS_WORDS or folded in GENE_FAMILIES:
        return True
    last = name.strip().split()[-1] if name.strip() else ""
    if _PLURAL_SYMBOL.match(last.split("-")[-1]):
        return True
    plural = words[-1]
    if not plural.endswith("s") or plural.endswith(("ss", "us", "is")) or len(plural) < 4:
        return False
    singular = " ".join([*words[:-1], _singular(plural)])
    if singular in GENE_FAMILIES or (len(words) == 1 and plural[:-1] in GENE_FAMILIES):
        return True
    return _singular(plural).endswith(PROTEIN_NOUN_ENDS)


def is_generic_disease(name: str) -> bool:
    """Whether a disease name names a class of diseases or an outcome, not one disease (rules:
    module docstring).

    Example:
        >>> [is_generic_disease(n) for n in ("malignancies", "Cancer", "death", "melanoma")]
        [True, True, True, False]
    """
    words = [_singular(w) for w in fold(name).split()]
    return bool(words) and words[-1] in GENERIC_DISEASES and all(
        w in GENERIC_DISEASES or w in GENERIC_DISEASE_MODIFIERS for w in words)
