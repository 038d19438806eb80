"""README.md's measured numbers are the results files' (hymo_book.readme writes them)."""

from hymo_book.readme import README, measured_section, rewrite


def test_the_readme_measured_section_is_up_to_date():
    assert rewrite(README, check=True), ("README.md's measured section is stale: run "
                                         "`python3 book/hymo_book/readme.py`")


def test_the_section_quotes_every_file_it_reads():
    text = measured_section()
    for name in ("train_step_all_h200", "gated_delta_h200", "gdn_h200", "gdn_recurrent_h200",
                 "fsdp_h200", "mqar_seeds_h200", "gla_record_tf32_h200",
                 "gla_record_bf16x6_h200"):
        assert name in text
