"""Challenge track (ReX-MLE): cards, leaderboards, submission grading, ranking and the judge."""
