"""Gene symbols that are ordinary English words or other common capitalised tokens
(:mod:`curation.matching.symbols` keeps them in their own case and upper case only)."""

from __future__ import annotations

#: Three-letter amino-acid codes: "Ser to Asp", "Gly12" are residues, never the ASP or GLY gene.
AMINO_ACID_CODES = frozenset(
    "ala arg asn asp cys gln glu gly his ile leu lys met phe pro ser thr trp tyr val".split())
#: Capitalised tokens of other meanings seen in abstracts: Cox regression, cis-acting, Tel Aviv,
#: the SmaI enzyme, Pam3CSK4, Apo A-I, authors' names (Ren).
ABBREVIATIONS = frozenset("cox cis tel sma pam apo ren sam".split())

#: Gene symbols that are ordinary English words: never matched in lower or capitalised case
#: ("Met in 1990", "a set of", "the rest"), only as written or in upper case.
ORDINARY_WORDS = frozenset("""
act age aim air all and any apc arm art ask bad bag bar bat bed big bin bit box boy but can cap
car cat clock cut day did die dog ear eat egg end era eye fat far few fit fix fly for fun gap
gas get had has hat her him his hit hot how ice ink its jet job joy key kit lab lag law lay led
let lid lip lot low mad man map mask max may met mix mod nap net new nod nor not now nut odd off
old one out own pan par pat pay pen per pet pig pin pit pod pot put raw ray red rest ret rod
row run sad sat saw say sea see set sex she shot sin sit six ski sky son spa spin star step sun
tab tan tap tar tea ten the tie tin tip toe ton top try two use van via war was wax way web
wet who why win yes yet you face gene hand hook iris lamp line ring rock rose scar side sink
snap tube wasp wing grid mice best bank cast coin fast fish fold gain golf heat host lime mark
melt nail nest pace park plot post rage raft sand seal slit soul tank tear well wine impact
ace app arc bid cad cry des fan gal hip ins mag ran chat
""".split()) | AMINO_ACID_CODES | ABBREVIATIONS
