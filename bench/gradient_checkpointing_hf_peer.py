"""The peer of bench/gradient_checkpointing.py: Hugging Face `transformers.BertModel` with and
without `gradient_checkpointing_enable()`, the same layers, data, loss and SGD updates (run by
the oracle venv's Python through gradient_checkpointing.py --worker peer)."""


def worker_peer(args, google_config, run_updates):
    import numpy as np
    import torch
    from _common import hf_bert_config
    from transformers import BertModel

    torch.manual_seed(0)
    seq, hidden = 512, google_config["hidden_size"]
    model = BertModel(hf_bert_config(google_config), add_pooling_layer=False)
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    rng = np.random.RandomState(0)
    ids = torch.tensor(rng.randint(1, google_config["vocab_size"], [args.batch_size, seq]))
    projection = torch.tensor(rng.randn(args.batch_size, seq, hidden) / seq,
                              dtype=torch.float32)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-5)

    def update(_):
        optimizer.zero_grad(set_to_none=True)
        loss = (model(input_ids=ids).last_hidden_state * projection).sum()
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return run_updates(update, args)
