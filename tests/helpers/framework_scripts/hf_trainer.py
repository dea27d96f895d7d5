"""Training in the Hugging Face ``transformers.Trainer`` idiom, with a tiny BERT from a config.

A synthetic torch Dataset yields dicts of ``input_ids``/``attention_mask``/``labels`` (16
tokens; the label says whether the first token is below 50); ``TrainingArguments(use_cpu=True,
...)`` makes the Trainer join the torchrun ranks over gloo; ``compute_metrics`` returns accuracy.
What it prints is the Trainer's own: a tqdm bar on stderr and, per epoch, log dicts such as
``{'loss': ..., 'epoch': '1'}`` and ``{'eval_loss': ..., 'eval_accuracy': ..., 'epoch': '1'}``,
then the train summary ``{'train_runtime': ..., 'train_loss': ..., 'epoch': ...}``. On N ranks
transformers 5.24 logs the losses N times too large (``average_tokens_across_devices`` scales
them by the number of processes), so 2 ranks show about 1.38 where 1 rank shows 0.69.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np
import torch
from _leave import leave
from torch.utils.data import Dataset
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    EvalPrediction,
    Trainer,
    TrainingArguments,
)

SEQ_LEN = 16


class SyntheticTokens(Dataset[dict[str, torch.Tensor]]):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.input_ids = torch.randint(1, 100, (n, SEQ_LEN), generator=g)
        self.labels = (self.input_ids[:, 0] < 50).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.input_ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": self.labels[i]}


def compute_metrics(pred: EvalPrediction) -> dict[str, float]:
    logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
    return {"accuracy": float((np.argmax(logits, axis=-1) == pred.label_ids).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    out = tempfile.TemporaryDirectory(dir=".", prefix=".hf_trainer_")
    training_args = TrainingArguments(
        output_dir=out.name,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        learning_rate=1e-3,
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=False,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=SyntheticTokens(512, seed=0),
        eval_dataset=SyntheticTokens(128, seed=1),
        compute_metrics=compute_metrics,
    )
    trainer.train()
    out.cleanup()  # os._exit below skips the finalizer that would remove it
    leave()


if __name__ == "__main__":
    main()
