"""The photo benchmark's set: every photo is on disk (scikit-image's wheel, a dev requirement),
the set is as varied as issue 30 asks, and every box is a box on the photo."""

import pytest
from PIL import Image

from lsbcore.studies.benchmarks.photos import PUBLIC, main, photo_path


def test_the_public_set_is_on_disk_and_varied():
    modes, formats = set(), set()
    for name in PUBLIC:
        with Image.open(photo_path(name)) as image:
            modes.add(image.mode)
            formats.add(image.format)
    assert len(PUBLIC) >= 8
    assert {"RGB", "L", "RGBA"} <= modes and {"JPEG", "PNG"} <= formats


@pytest.mark.parametrize("name", [n for n, (_, _, box) in PUBLIC.items() if box is not None])
def test_every_box_lies_on_its_photo(name):
    left, top, right, bottom = PUBLIC[name][2]
    assert 0 <= left < right <= 1 and 0 <= top < bottom <= 1


def test_unknown_photos_end_the_command_with_a_sentence(capsys):
    with pytest.raises(SystemExit):
        main(["--photos", "rocket,nope"])
    assert "no such photo in the public set" in capsys.readouterr().err
