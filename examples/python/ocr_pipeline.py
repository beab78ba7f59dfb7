#!/usr/bin/python3
"""OCR with two models in one process: PP-OCRv4 detection finds the text lines of an image,
each line is cropped and PP-OCRv4 recognition reads it.

The image is made in code (lines of glyphs drawn from a small bitmap font), so the
example needs nothing but the two models. It runs the pipeline twice — both sessions in
this process, then each in its own worker process (isolation="process") — and checks that
the two give the same boxes and the same readings.

    /usr/bin/python3 examples/python/ocr_pipeline.py [--models DIR] [--dict ppocr_keys_v1.txt]

Without --dict the readings are printed as character indices (the character list of
PP-OCRv4 is not part of the model).
"""
import argparse
import os
import sys

import numpy as np

import bulkhead

# A 5x7 bitmap font for the characters drawn on the test image.
FONT = {
    "B": ["11110", "10001", "10001", "11110", "10001", "10001", "11110"],
    "U": ["10001", "10001", "10001", "10001", "10001", "10001", "01110"],
    "L": ["10000", "10000", "10000", "10000", "10000", "10000", "11111"],
    "K": ["10001", "10010", "10100", "11000", "10100", "10010", "10001"],
    "H": ["10001", "10001", "10001", "11111", "10001", "10001", "10001"],
    "E": ["11111", "10000", "10000", "11110", "10000", "10000", "11111"],
    "A": ["01110", "10001", "10001", "11111", "10001", "10001", "10001"],
    "D": ["11110", "10001", "10001", "10001", "10001", "10001", "11110"],
    "O": ["01110", "10001", "10001", "10001", "10001", "10001", "01110"],
    "C": ["01110", "10001", "10000", "10000", "10000", "10001", "01110"],
    "R": ["11110", "10001", "10001", "11110", "10100", "10010", "10001"],
    "2": ["01110", "10001", "00001", "00110", "01000", "10000", "11111"],
    "0": ["01110", "10011", "10101", "10101", "11001", "10001", "01110"],
    "6": ["00110", "01000", "10000", "11110", "10001", "10001", "01110"],
    " ": ["00000"] * 7,
}


def make_image(lines, height=480, width=640, scale=4):
    """A white RGB image with `lines` of text drawn in black, and where each line is."""
    img = np.full((height, width, 3), 255, np.uint8)
    y = 60
    for text in lines:
        x = 40
        for ch in text:
            glyph = np.array([[c == "1" for c in row] for row in FONT[ch]])
            block = np.kron(glyph, np.ones((scale, scale), bool))
            h, w = block.shape
            img[y:y + h, x:x + w][block] = 20
            x += w + scale * 2
        y += 7 * scale + 60
    return img


def detect(det, img):
    """Text boxes (y0, y1, x0, x1) from the detector's probability map."""
    x = (img.astype(np.float32) / 255.0 - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225],
                                                                                                  np.float32)
    x = np.ascontiguousarray(x.transpose(2, 0, 1)[None])
    prob = det.run({"x": x})["sigmoid_0.tmp_0"][0, 0]
    mask = prob > 0.3
    boxes = []
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return boxes, prob
    # Bands of consecutive rows are text lines; each band's column extent is its box.
    breaks = np.flatnonzero(np.diff(rows) > 1)
    for band in np.split(rows, breaks + 1):
        y0, y1 = int(band[0]), int(band[-1]) + 1
        cols = np.flatnonzero(mask[y0:y1].any(axis=0))
        if y1 - y0 >= 4 and cols.size >= 4:
            boxes.append((y0, y1, int(cols[0]), int(cols[-1]) + 1))
    return boxes, prob


def crop_for_recognition(img, box, pad=6, height=48, width=320):
    """The box (padded) resized to 48 pixels high, normalised to [-1, 1], padded to 320 wide."""
    y0, y1, x0, x1 = box
    y0, y1 = max(0, y0 - pad), min(img.shape[0], y1 + pad)
    x0, x1 = max(0, x0 - pad), min(img.shape[1], x1 + pad)
    crop = img[y0:y1, x0:x1].astype(np.float32)
    w = min(width, max(1, int(round(crop.shape[1] * height / crop.shape[0]))))
    ys = (np.arange(height) * crop.shape[0] / height).astype(int)
    xs = (np.arange(w) * crop.shape[1] / w).astype(int)
    resized = crop[ys][:, xs]
    out = np.zeros((height, width, 3), np.float32)
    out[:, :w] = (resized / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(out.transpose(2, 0, 1)[None])


def ctc_greedy(probs):
    """Character indices from a [T, classes] softmax: argmax, repeats merged, blanks (0) dropped."""
    best = probs.argmax(axis=1)
    keep = np.concatenate([[True], best[1:] != best[:-1]]) & (best != 0)
    return [int(i) for i in best[keep]], float(probs.max(axis=1)[keep].mean()) if keep.any() else 0.0


def pipeline(env, models, img, **options):
    det = env.load(os.path.join(models, "ppocrv4_det", "model.onnx"), **options)
    rec = env.load(os.path.join(models, "ppocrv4_rec", "model.onnx"), **options)
    boxes, _ = detect(det, img)
    readings = []
    for box in boxes:
        probs = rec.run({"x": crop_for_recognition(img, box)})["softmax_11.tmp_0"][0]
        readings.append(ctc_greedy(probs))
    return boxes, readings


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_models = os.path.join(os.path.dirname(os.path.dirname(here)), "..", "shared", "models")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=os.environ.get("BULKHEAD_MODELS", default_models))
    ap.add_argument("--dict", help="PP-OCR's character list (one per line) to print text instead of indices")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    chars = None
    if args.dict:
        with open(args.dict, encoding="utf-8") as f:
            chars = [""] + [line.rstrip("\n") for line in f] + [" "]

    img = make_image(["BULKHEAD 2026", "DECODER", "HOLD A CARD"])
    env = bulkhead.Env()
    results = {}
    for isolation in ("in-process", "process"):
        boxes, readings = pipeline(env, args.models, img, isolation=isolation, threads=args.threads)
        results[isolation] = (boxes, readings)
        print("%s: %d text lines" % (isolation, len(boxes)))
        for box, (idx, conf) in zip(boxes, readings):
            text = "".join(chars[i] for i in idx if i < len(chars)) if chars else str(idx)
            print("  box y %d-%d x %d-%d: %s (confidence %.2f)" % (box + (text, conf)))
    same = results["in-process"] == results["process"]
    print("in-process and worker processes agree: %s" % ("yes" if same else "NO"))
    if not results["in-process"][0]:
        print("no text found", file=sys.stderr)
        return 1
    if not all(idx for idx, _ in results["in-process"][1]):
        print("a text line read as nothing", file=sys.stderr)
        return 1
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
