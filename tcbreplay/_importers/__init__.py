"""_importers"""
