# Targets users type (docs/design.md §6): prepare_/train_/eval_ per model, mine_ per language pair.

for _model in MODELS:

    rule:
        name:
            rule_name("prepare", _model)
        default_target: False
        input:
            f"results/hdf5/{_model}.h5",
        localrule: True

    rule:
        name:
            rule_name("train", _model)
        input:
            get_model_outputs(_model),
        localrule: True

    rule:
        name:
            rule_name("eval", _model)
        input:
            get_eval_outputs(_model),
        localrule: True


for _pair in MINE_PAIRS:

    rule:
        name:
            rule_name("mine", _pair)
        input:
            get_mine_outputs(_pair),
        localrule: True


for _pair in BUCC_PAIRS:

    rule:
        name:
            rule_name("bucc", _pair)
        input:
            f"results/bucc/{_pair}/bucc.json",
        localrule: True
