"""The draft vocabulary and its d2t / t2d maps."""
import numpy as np
import pytest

from utils.training.eagle3_vocab import draft_vocabulary, vocabulary_from_d2t
from utils.training.scaffold import TrainingError


def test_most_frequent_ids_are_kept_in_ascending_order():
    targets = [7, 7, 7, 3, 3, 9, 1]
    vocab = draft_vocabulary(targets, 2, 10)
    assert vocab.target_ids.tolist() == [3, 7]
    assert vocab.coverage == pytest.approx(5 / 7)


def test_d2t_maps_each_draft_id_to_its_target_id():
    vocab = draft_vocabulary([5, 5, 2, 8, 8, 8], 3, 10)
    d2t = vocab.d2t()
    assert d2t.dtype == np.int64
    assert (np.arange(3) + d2t).tolist() == [2, 5, 8]
    assert d2t.tolist() == [2, 4, 6]


def test_t2d_marks_exactly_the_kept_ids():
    vocab = draft_vocabulary([5, 5, 2, 8], 3, 10)
    t2d = vocab.t2d()
    assert t2d.dtype == bool and t2d.shape == (10,)
    assert np.flatnonzero(t2d).tolist() == [2, 5, 8]


def test_target_to_draft_inverts_d2t():
    vocab = draft_vocabulary([4, 4, 1, 6, 9, 9, 9], 3, 12)
    index = vocab.target_to_draft()
    for draft_id, target_id in enumerate(vocab.target_ids):
        assert index[target_id] == draft_id
    assert index[0] == -1 and index[6] == -1


def test_always_keep_and_fill_to_exact_size():
    vocab = draft_vocabulary([3, 3], 4, 10, always_keep=[2])
    assert vocab.size == 4
    assert 2 in vocab.target_ids and 3 in vocab.target_ids
    assert len(set(vocab.target_ids.tolist())) == 4


def test_ties_prefer_lower_ids():
    assert draft_vocabulary([9, 4, 6], 2, 10).target_ids.tolist() == [4, 6]


def test_round_trip_through_d2t():
    vocab = draft_vocabulary(np.array([1, 1, 5, 7, 7, 7, 3]), 3, 8)
    again = vocabulary_from_d2t(vocab.d2t(), 8)
    assert again.target_ids.tolist() == vocab.target_ids.tolist()


@pytest.mark.parametrize("size", [0, -1, 11, 2.5, True])
def test_bad_sizes_are_refused(size):
    with pytest.raises(TrainingError):
        draft_vocabulary([1, 2], size, 10)


def test_ids_outside_the_vocabulary_are_refused():
    with pytest.raises(TrainingError):
        draft_vocabulary([1, 12], 2, 10)


def test_d2t_that_collides_or_leaves_the_vocabulary_is_refused():
    with pytest.raises(TrainingError, match="same target"):
        vocabulary_from_d2t([1, 0], 10)  # draft 0 -> 1, draft 1 -> 1
    with pytest.raises(TrainingError, match="outside"):
        vocabulary_from_d2t([0, 9], 10)  # draft 1 -> 10
