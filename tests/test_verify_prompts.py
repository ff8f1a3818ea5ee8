"""specreg.verify.prompts: datasets from local files, few-shot examples, templates and categories."""

import json

import pytest

from conftest import fixture_config
from hostile_helpers import run
from specreg.verify.prompts import load_prompts
from verify_helpers import write_rows
from weights import write_draft


def test_a_named_dataset_from_a_local_file_is_recorded_by_its_content(tmp_path):
    import hashlib

    rows = write_rows(tmp_path / "gsm8k.jsonl")
    p = load_prompts("gsm8k", dataset_file=str(rows), num_prompts=5, chat=True, few_shot=2)
    # the file is what ran: never recorded at the Hub dataset's pinned revision or split
    assert (p.dataset, p.split, p.revision) == ("gsm8k", None, None)
    assert p.source == f"{rows} (sha256 {hashlib.sha256(rows.read_bytes()).hexdigest()})"
    # CI's chat form (use_chat_completions): the whole few-shot text is one user message
    assert len(p.items) == 5 and len(p.items[0]) == 1
    assert p.items[0][0] == {
        "role": "user",
        "content": "Question: What is 0 + 0?\nAnswer: 0\n\nQuestion: What is 1 + 1?"
        "\nAnswer: 2\n\nQuestion: What is 2 + 2?\nAnswer:",
    }
    raw = load_prompts(str(rows), num_prompts=3, chat=False, few_shot=1)
    assert raw.dataset == "gsm8k.jsonl" and raw.items[0].startswith("Question: What is 0 + 0?\nAnswer: 0\n\n")


def test_few_shot_examples_from_another_split_and_templates(tmp_path):
    from specreg.errors import SpecregError

    test_rows = write_rows(tmp_path / "test.jsonl", n=4)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"question": f"Shot {i}?", "answer": f"#### {i}"}) + "\n" for i in range(6)))
    p = load_prompts(
        "gsm8k", dataset_file=str(test_rows), shots_file=str(train), shots_split="train", few_shot=2, chat=False
    )
    # every question is asked (none spent as an example), each after the train split's first two rows
    assert len(p.items) == 4 and p.shots_split == "train"
    assert (
        p.items[3]
        == "Question: Shot 0?\nAnswer: #### 0\n\nQuestion: Shot 1?\nAnswer: #### 1\n\nQuestion: What is 3 + 3?\nAnswer:"
    )
    assert "shots " in p.source and "sha256" in p.source.split("shots ")[1]
    with pytest.raises(SpecregError, match="--shots-file"):
        load_prompts("gsm8k", dataset_file=str(test_rows), shots_split="train", few_shot=2)
    t = load_prompts("gsm8k", dataset_file=str(test_rows), template="{question}\nPlease reason step by step.")
    assert t.items[1] == [{"role": "user", "content": "What is 1 + 1?\nPlease reason step by step."}]
    with pytest.raises(SpecregError, match="template"):
        load_prompts("gsm8k", dataset_file=str(test_rows), template="{prompt}")


def test_dataset_category_and_bad_input(tmp_path):
    # MT-Bench rows (their prompt in "turns"), half of them in the writing category
    rows = tmp_path / "mt.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"turns": [f"Write about {i}."], "category": "writing" if i % 2 else "other"}) + "\n"
            for i in range(30)
        )
    )
    p = load_prompts("mt-bench:writing", dataset_file=str(rows), num_prompts=None)
    assert p.subset == "writing" and len(p.items) == 15 and p.items[0][0]["content"] == "Write about 1."
    from specreg.errors import SpecregError

    with pytest.raises(SpecregError, match="no such file"):
        load_prompts("not-a-dataset")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(SpecregError, match="not a JSONL dataset"):
        load_prompts(str(tmp_path / "bad.jsonl"))


# -- catalog values verify would refuse --------------------------------------------------------------------


def test_verify_refuses_a_template_with_a_format_spec_before_allocating(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"question": "q"}\n')
    r = run(
        "verify",
        str(write_draft(tmp_path / "d", fixture_config("eagle3_generated"))),
        "--server",
        "http://127.0.0.1:9",
        "--dataset",
        "gsm8k",
        "--dataset-file",
        str(rows),
        "--template",
        "{question:>1500000000}",
    )
    assert r.returncode == 2 and "not a plain field" in r.stderr and "MemoryError" not in r.stderr, r.stderr


def test_a_rows_file_of_another_dataset_is_refused_naming_the_file_row_and_field(tmp_path):
    """MT-Bench rows given as gsm8k's (and gsm8k's as MT-Bench's) were read from whatever text field
    they had: the run measured one dataset under the other's name."""
    from specreg.errors import SpecregError

    mt = tmp_path / "mt.jsonl"
    mt.write_text(json.dumps({"turns": ["Write a poem."], "category": "writing"}) + "\n")
    with pytest.raises(SpecregError) as err:
        load_prompts("gsm8k", dataset_file=str(mt))
    assert str(err.value) == (
        f"{mt}: row 1 has no 'question' (every gsm8k row, openai/gsm8k, has its prompt there; this row's "
        "fields: category, turns): these are not gsm8k rows; give the file with the dataset it holds "
        f"(--dataset NAME, or --dataset {mt} for rows of its own)"
    )
    gsm = write_rows(tmp_path / "gsm8k.jsonl", n=3)
    with pytest.raises(SpecregError, match="row 1 has no 'turns'.*these are not mt-bench rows"):
        load_prompts("mt-bench", dataset_file=str(gsm))
    # a file that is its own dataset has no fields to fit
    assert load_prompts(str(mt)).items == ([{"role": "user", "content": "Write a poem."}],)
