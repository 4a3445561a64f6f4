"""Object and face detection: decoders for YOLOX, YOLOv5, YOLOv8/11, end-to-end exports and
YuNet; NMS; agreement.
"""
