"""_score"""
