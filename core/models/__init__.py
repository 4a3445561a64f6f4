"""The model catalogue, model specs and inspection of a user's ONNX file."""
