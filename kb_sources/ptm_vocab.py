"""UniProt modification vocabulary: PTM types and amino-acid names (pure data, no I/O)."""

from __future__ import annotations

#: Modification name fragment (lower case) -> normalised PTM type; first match wins, so more
#: specific fragments come before the generic ones they contain ("pyridoxal phosphate" < "phospho").
PTM_TYPES: tuple[tuple[str, str], ...] = (
    ("adp-ribosyl", "ADP-ribosylation"),
    ("pyridoxal phosphate", "pyridoxal phosphate attachment"),
    ("pantetheine", "phosphopantetheinylation"),
    ("phospho", "phosphorylation"),
    ("hydroxyisobutyryl", "2-hydroxyisobutyrylation"),
    ("acetyl", "acetylation"),
    ("methyl", "methylation"),
    ("succinyl", "succinylation"),
    ("malonyl", "malonylation"),
    ("crotonyl", "crotonylation"),
    ("glutaryl", "glutarylation"),
    ("butyryl", "butyrylation"),
    ("lactoyl", "lactylation"),
    ("biotinyl", "biotinylation"),
    ("lipoyl", "lipoylation"),
    ("hydroxy", "hydroxylation"),
    ("citrulline", "citrullination"),
    ("sulfo", "sulfation"),
    ("nitroso", "S-nitrosylation"),
    ("nitro", "nitration"),
    ("carboxy", "carboxylation"),
    ("deamidated", "deamidation"),
    ("pyrrolidone carboxylic acid", "pyroglutamate formation"),
    ("amide", "amidation"),
    ("sulfoxide", "oxidation"),
    ("sulfenic", "oxidation"),
    ("allysine", "oxidation"),
    ("formyl", "formylation"),
    ("palmitoyl", "palmitoylation"),
    ("myristoyl", "myristoylation"),
)

#: Amino-acid names (longest first so "isoleucine" wins over "leucine") -> one-letter code.
_AMINO_ACIDS: tuple[tuple[str, str, str], ...] = tuple(sorted((
    ("alanine", "A", "Ala"), ("arginine", "R", "Arg"), ("asparagine", "N", "Asn"),
    ("aspartate", "D", "Asp"), ("aspartic acid", "D", "Asp"), ("cysteine", "C", "Cys"),
    ("glutamine", "Q", "Gln"), ("glutamate", "E", "Glu"), ("glutamic acid", "E", "Glu"),
    ("glycine", "G", "Gly"), ("histidine", "H", "His"), ("isoleucine", "I", "Ile"),
    ("leucine", "L", "Leu"), ("lysine", "K", "Lys"), ("methionine", "M", "Met"),
    ("phenylalanine", "F", "Phe"), ("proline", "P", "Pro"), ("serine", "S", "Ser"),
    ("threonine", "T", "Thr"), ("tryptophan", "W", "Trp"), ("tyrosine", "Y", "Tyr"),
    ("valine", "V", "Val"), ("citrulline", "R", "Arg"), ("allysine", "K", "Lys"),
    ("selenocysteine", "U", "Sec"), ("pyrrolysine", "O", "Pyl"),
), key=lambda t: -len(t[0])))
ONE_LETTER_NAMES = {one: (name, three) for name, one, three in reversed(_AMINO_ACIDS)
                if name not in ("aspartic acid", "glutamic acid", "citrulline", "allysine")}


def normalise_ptm(modification: str) -> str:
    """PTM type of a UniProt modification name ("N6-acetyllysine" -> "acetylation").

    Unknown names are returned lower-cased.
    """
    low = modification.lower()
    for fragment, ptm in PTM_TYPES:
        if fragment in low:
            return ptm
    return low


def residue_from_name(modification: str) -> str:
    """One-letter residue named in a modification ("Omega-N-methylarginine" -> "R"), else ""."""
    low = modification.lower()
    for name, one, _ in _AMINO_ACIDS:
        if name in low:
            return one
    return ""
