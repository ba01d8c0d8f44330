"""One scalar of a flat YAML file, for the package's own small readers (it depends on no YAML
library): the tracker YAMLs and a run's args.yaml."""


def scalar(text):
    """A YAML 1.1 scalar as PyYAML reads it: booleans, null, numbers, quoted or bare strings."""
    if text[:1] in ("'", '"') and text[-1:] == text[:1]:
        return text[1:-1]
    lower = text.lower()
    if lower in ("true", "yes", "on", "false", "no", "off"):
        return lower in ("true", "yes", "on")
    if lower in ("", "~", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
