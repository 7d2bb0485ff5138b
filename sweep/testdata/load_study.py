"""Reads a sweep's journal with Optuna's own JournalStorage and prints what Optuna sees, as JSON.

Usage: load_study.py read JOURNAL STUDY   -- load the study nitro wrote
       load_study.py write JOURNAL STUDY  -- first write a study with Optuna itself (two trials, the
                                             second pruned), for nitro's reader; then print it

The output is what sweep/optuna_test.go compares with nitro's view of the same file: every trial's
number, state, value, params (Optuna's external and internal forms), distributions, intermediate
values and user attrs, and the study's direction, user attrs and best trial. NaN is printed bare,
as Python's json module writes it.
"""

import json
import sys

import optuna


def storage(path):
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))


def write(path, name):
    study = optuna.create_study(
        study_name=name,
        storage=storage(path),
        direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.set_user_attr("metric", "val_acc")
    study.set_user_attr("seed", 3)

    def objective(trial):
        trial.suggest_float("LearningRate", 1e-4, 1e-1, log=True)
        trial.suggest_int("Layers", 1, 4)
        trial.suggest_categorical("Act", ["relu", "gelu"])
        trial.suggest_float("Dropout", 0.0, 0.5)
        trial.set_user_attr("run_dir", "trials/%04d" % trial.number)
        if trial.number == 0:
            trial.report(0.5, 1)
            trial.report(0.75, 2)
            return 0.75
        trial.report(float("nan"), 1)
        trial.report(0.25, 2)
        raise optuna.TrialPruned()

    study.optimize(objective, n_trials=2)


def distribution(d):
    out = {"class": type(d).__name__}
    for k, v in d._asdict().items():
        out[k] = list(v) if isinstance(v, tuple) else v
    return out


def read(path, name):
    study = optuna.load_study(study_name=name, storage=storage(path))
    try:
        best = study.best_trial.number
    except ValueError:
        best = None
    trials = []
    for t in study.trials:
        trials.append(
            {
                "number": t.number,
                "state": t.state.name,
                "value": t.value,
                "params": t.params,
                "internal": {k: t.distributions[k].to_internal_repr(v) for k, v in t.params.items()},
                "distributions": {k: distribution(d) for k, d in t.distributions.items()},
                "intermediate": {str(k): v for k, v in t.intermediate_values.items()},
                "user_attrs": t.user_attrs,
                "started": t.datetime_start is not None,
                "completed": t.datetime_complete is not None,
            }
        )
    return {
        "study_name": study.study_name,
        "direction": study.direction.name,
        "user_attrs": study.user_attrs,
        "best": best,
        "trials": trials,
    }


def main():
    mode, path, name = sys.argv[1:4]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if mode == "write":
        write(path, name)
    elif mode != "read":
        sys.exit("mode must be read or write, not %r" % mode)
    json.dump(read(path, name), sys.stdout)


if __name__ == "__main__":
    main()
