"""The recipe of the keras_* test models: Keras networks with random weights, exported with a
dynamic batch (Keras' default) and converted to full-int8 TFLite by TensorFlow's converter.

    python tests/data/tflite/keras/build.py OUT_DIR      # in a virtualenv with tensorflow-cpu

TensorFlow is not a dependency of npu-sim: the stored models were made once, with
tensorflow-cpu 2.21.0 (Keras 3.15), from these definitions in a run that built other networks
first, so their random weights (and bytes) differ from what this script makes; the structure,
the export path and the operators are the same. The tests check npu-sim against the stored
models' reference outputs (see ../README.md), which `ai-edge-litert`'s reference kernels
compute.
"""
import sys
from pathlib import Path

import numpy as np
import keras
import tensorflow as tf
from keras import layers as L


def conv1d():
    x0 = L.Input((800, 1))
    x = L.Conv1D(8, 9, strides=2, padding="same", activation="relu")(x0)
    x = L.MaxPooling1D(4)(x)
    x = L.Conv1D(16, 5, padding="same", activation="relu")(x)
    x = L.MaxPooling1D(2)(x)
    x = L.SeparableConv1D(24, 3, padding="same", activation="relu")(x)
    x = L.Conv1D(32, 3, dilation_rate=2, padding="same", activation="relu")(x)
    x = L.AveragePooling1D(2)(x)
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(x0, L.Dense(12, activation="softmax")(x), name="conv1d")


def transformer():
    x0 = L.Input((16, 32))
    a = L.MultiHeadAttention(num_heads=4, key_dim=8)(x0, x0)
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x0, a]))
    f = L.Dense(32)(L.Dense(64, activation="gelu")(x))
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, f]))
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(x0, L.Dense(5, activation="softmax")(x), name="transformer")


def layout():
    x0 = L.Input((32, 32, 4))
    x = L.ZeroPadding2D(((1, 2), (2, 1)))(x0)
    x = L.Conv2D(8, 3, activation="relu6")(x)
    x = L.Cropping2D(((1, 1), (2, 0)))(x)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    x = L.Permute((3, 1, 2))(x)
    x = L.Reshape((8, -1))(x)
    x = L.Lambda(lambda t: t[:, ::2, 1:-1])(x)
    x = L.Permute((2, 1))(x)
    mean = L.Lambda(lambda t: tf.reduce_mean(t, axis=1))(x)
    top = L.Lambda(lambda t: tf.reduce_max(t, axis=1))(x)
    x = L.Concatenate()([mean, top, L.GlobalMaxPooling1D()(x)])
    x = L.Reshape((2, 3))(L.Dense(6)(x))
    return keras.Model(x0, L.Softmax(axis=-1)(x), name="layout")


MODELS = {"keras_conv1d": conv1d, "keras_transformer": transformer, "keras_layout": layout}


def int8_tflite(model) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    shape = [1] + list(model.input_shape[1:])
    rng = np.random.default_rng(7)

    def calibration():
        for _ in range(64):
            yield [rng.standard_normal(shape).astype(np.float32)]
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = calibration
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    return conv.convert()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for name, build in MODELS.items():
        keras.utils.set_random_seed(1234)
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "model.tflite").write_bytes(int8_tflite(build()))
