"""Imaging and multimodal tracks: segmentation, enhancement, detection, VQA, report generation."""
