"""gretel_synthetics.tokenizers: the tokenizer trainers, as config keys."""


class BaseTokenizerTrainer:
    name = ""

    def __init__(self, config=None, **keys):
        self.config = config
        self.keys = keys

    def library_keys(self) -> dict:
        return {"tokenizer": self.name, **self.keys}


class CharTokenizerTrainer(BaseTokenizerTrainer):
    name = "char"


class SentencePieceTokenizerTrainer(BaseTokenizerTrainer):
    """vocab_size, character_coverage, pretrain_sentence_count, max_line_len."""
    name = "sentencepiece"

    def __init__(self, vocab_size=None, character_coverage=None, pretrain_sentence_count=None,
                 max_line_len=None, config=None):
        keys = {k: v for k, v in dict(vocab_size=vocab_size, character_coverage=character_coverage,
                                      pretrain_sentence_count=pretrain_sentence_count,
                                      max_line_len=max_line_len).items() if v is not None}
        super().__init__(config, **keys)
