"""_score/scorers"""
