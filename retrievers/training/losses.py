"""Pointwise margin losses for bi-encoder fine-tuning (EDEL's multi-margin loss as coded).

A pair ``(query, document)`` carries a label ``y`` (1 positive, 0 negative) and a margin ``m`` on
the cosine distance ``D = 1 - cos(v(q), v(d))``: positives are pulled inside ``m``, negatives pushed
beyond it. Margins come from a per-class ``mu`` through :func:`margin_from_mu`.

References:
    Wang & Leser, EDEL; released code ``models/transformers.py`` (``MarginContrastiveLoss``) and
    ``models/margin_config.py``. TRAINING.md section 1.5 explains why the paper's Eq. 2 is not
    implemented literally.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import StrEnum
from numbers import Real
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from retrievers.errors import RetrieverError, unknown_name

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

#: EDEL's released weight: lambda_weight = 0.2 applies only to noisy distant-BM25 examples, which
#: the released runs disable, so every example gets 1 - 0.2.
DEFAULT_WEIGHT = 0.8


class MarginFunction(StrEnum):
    """How a class's ``mu`` becomes a cosine-distance margin.

    ``ANGLE`` (EDEL's released code): ``mu`` is an angle in units of 90 degrees and
    ``m = 1 - cos(mu * pi / 2)``. ``DISTANCE``: ``mu`` already is the distance, ``m = mu``.
    """

    ANGLE = "angle"
    DISTANCE = "distance"

    @classmethod
    def coerce(cls, value: MarginFunction | str) -> MarginFunction:
        """Turn a plain string into a member.

        Raises:
            RetrieverError: Unknown name; the message lists the options.
        """
        try:
            return cls(value)
        except ValueError:
            raise unknown_name("margin function", value, [m.value for m in cls]) from None


def check_mu(mu: object) -> float:
    """Validate a class's ``mu``.

    Returns:
        ``mu`` as a float.

    Raises:
        RetrieverError: ``mu`` is not a number from 0 to 2.
    """
    if isinstance(mu, bool) or not isinstance(mu, Real) or not 0.0 <= mu <= 2.0:
        raise RetrieverError(
            f"mu must be a number from 0 to 2 (0 = identical, 1 = orthogonal, 2 = opposite), got "
            f"{mu!r}; fix the class's mu in the margin file"
        )
    return float(mu)


def margin_from_mu(mu: float, kind: MarginFunction | str = MarginFunction.ANGLE) -> float:
    """Map a class's ``mu`` to a margin on the cosine distance ``1 - cos`` (range 0..2).

    Examples (angle): mu 0.2 -> 0.049, 0.6 -> 0.412, 1.0 -> 1.0, 1.2 -> 1.309.

    Args:
        mu: The class value, 0 (identical) to 2 (opposite); 1 means orthogonal for ``angle``.
        kind: ``"angle"`` (default, EDEL's code) or ``"distance"``.

    Returns:
        The margin ``m``.

    Raises:
        RetrieverError: ``mu`` is not a number in [0, 2], or ``kind`` is unknown.
    """
    function = MarginFunction.coerce(kind)
    mu = check_mu(mu)
    if function is MarginFunction.ANGLE:
        return 1.0 - math.cos(mu * math.pi / 2.0)
    return mu


def multi_margin_loss(distances: Tensor, labels_y: Tensor, margins: Tensor,
                      weight: float | Tensor = DEFAULT_WEIGHT) -> Tensor:
    """The pointwise squared hinge of EDEL, averaged over the batch.

    ``loss_i = 0.5 * (y_i * relu(D_i - m_i)^2 + (1 - y_i) * relu(m_i - D_i)^2)`` and
    ``L = mean_i(weight * loss_i)``.

    Args:
        distances: Cosine distances ``D``, shape (batch,).
        labels_y: 1.0 for positives, 0.0 for negatives, shape (batch,).
        margins: Margins ``m`` on the cosine distance, shape (batch,).
        weight: A constant or per-example weights, shape (batch,).

    Returns:
        The scalar loss.
    """
    too_far = F.relu(distances - margins).pow(2)  # (batch,) positives outside their margin
    too_close = F.relu(margins - distances).pow(2)  # (batch,) negatives inside their margin
    per_pair = 0.5 * (labels_y * too_far + (1.0 - labels_y) * too_close)
    return (weight * per_pair).mean()


class MultiMarginLoss(nn.Module):
    """EDEL's ``MarginContrastiveLoss`` (cosine distance) with a margin per example.

    Inputs:
        +---------------------------+-----------------------------------------------------+
        | Texts                     | Labels                                              |
        +===========================+=====================================================+
        | (query, document) pairs   | ``[y, m]``: y 1.0 positive / 0.0 negative, m the    |
        |                           | cosine-distance margin (see :func:`margin_from_mu`) |
        +---------------------------+-----------------------------------------------------+

    Worked example (TRAINING.md 1.5, weight 0.8, angle margins), loss of one pair:

    ======================================== ==== ===== ==== ======
    pair                                     mu   m     cos  w*l
    ======================================== ==== ===== ==== ======
    complete positive                        0    0     0.70 0.0360
    noisy positive (class 3), inside margin  0.6  0.412 0.70 0
    noisy positive (class 3), outside        0.6  0.412 0.40 0.0141
    negative (class 4), too close            0.8  0.691 0.50 0.0146
    negative (class 4), far enough           0.8  0.691 0.20 0
    random negative (PTM)                    1.2  1.309 0.00 0.0382
    ======================================== ==== ===== ==== ======

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.sentence_transformer import SentenceTransformerTrainer

            model = SentenceTransformer("path/to/model")
            data = Dataset.from_dict({
                "query": ["BRAF V600E", "BRAF V600E"],
                "document": ["vemurafenib in V600E melanoma", "statins and cancer risk"],
                "label": [[1.0, 0.0], [0.0, margin_from_mu(1.0)]],
            })
            trainer = SentenceTransformerTrainer(model=model, train_dataset=data,
                                                 loss=MultiMarginLoss(model))
            trainer.train()

    Args:
        model: The bi-encoder; queries and documents share it.
        weight: The constant example weight (EDEL: 1 - lambda = 0.8).
    """

    def __init__(self, model: SentenceTransformer, weight: float = DEFAULT_WEIGHT) -> None:
        super().__init__()
        if isinstance(weight, bool) or not isinstance(weight, Real) or weight <= 0:
            raise RetrieverError(f"weight must be a positive number (EDEL: 0.8), got {weight!r}")
        self.model = model
        self.weight = float(weight)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        """Embed queries and documents and compute the loss.

        Args:
            sentence_features: ``[query features, document features]`` from the data collator.
            labels: ``[y, m]`` per pair, shape (batch, 2).

        Returns:
            The scalar loss.
        """
        embeddings = [self.model(features)["sentence_embedding"] for features in sentence_features]
        return self.compute_loss_from_embeddings(embeddings, labels)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor) -> Tensor:
        """The loss from ``[query embeddings, document embeddings]``, each (batch, dim)."""
        if len(embeddings) != 2:
            raise RetrieverError(
                f"MultiMarginLoss takes two text columns (query, document), got {len(embeddings)}"
            )
        queries, documents = embeddings
        if labels.dim() != 2 or labels.shape != (queries.shape[0], 2):
            raise RetrieverError(
                f"MultiMarginLoss expects labels of shape ({queries.shape[0]}, 2) holding [y, m] "
                f"per pair, got shape {tuple(labels.shape)}; build the label column as [y, margin]"
            )
        labels = labels.float()
        # (batch,) in fp32 even under bf16 autocast: the hinge compares small differences
        distances = 1.0 - F.cosine_similarity(queries.float(), documents.float(), dim=-1)
        return multi_margin_loss(distances, labels[:, 0], labels[:, 1], self.weight)

    def get_config_dict(self) -> dict[str, Any]:
        """Hyperparameters written to the model card."""
        return {"weight": self.weight, "distance": "cosine"}


def pair_loss(cos: float, positive: bool, margin: float, weight: float = DEFAULT_WEIGHT) -> float:
    """The loss of a single pair from its cosine, for checks and worked examples.

    Args:
        cos: Cosine similarity of query and document.
        positive: Whether the pair is a positive.
        margin: The cosine-distance margin.
        weight: The example weight.

    Returns:
        ``weight * 0.5 * violation^2`` as a float.
    """
    distance = torch.tensor([1.0 - cos], dtype=torch.float64)
    y = torch.tensor([1.0 if positive else 0.0], dtype=torch.float64)
    m = torch.tensor([margin], dtype=torch.float64)
    return float(multi_margin_loss(distance, y, m, weight))
