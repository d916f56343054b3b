from probe.redact import redact_argv


def test_secret_flags_assignments_and_urls_are_redacted():
    argv = [
        "svc.py",
        "--token=abc",
        "--password",
        "hunter2",
        "API_KEY=xyz",
        "AWS_SECRET_ACCESS_KEY=q",
        "--url",
        "https://bob:pw@h.example/x?api_key=9&q=1",
        "postgres://u:p@db/x",
    ]
    assert redact_argv(argv) == [
        "svc.py",
        "--token=***",
        "--password",
        "***",
        "API_KEY=***",
        "AWS_SECRET_ACCESS_KEY=***",
        "--url",
        "https://bob:***@h.example/x?api_key=***&q=1",
        "postgres://u:***@db/x",
    ]


def test_ordinary_arguments_are_kept():
    argv = [
        "svc.py",
        "--batch",
        "8",
        "-v",
        "--model",
        "resnet",
        "--author",
        "bob",
        "https://example.com/a?b=1",
        "MODEL_PATH=/m",
    ]
    assert redact_argv(argv) == argv


def test_secret_flag_followed_by_another_flag_hides_nothing_else():
    assert redact_argv(["--api-key", "--verbose"]) == ["--api-key", "--verbose"]
