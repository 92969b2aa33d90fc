"""_record"""
