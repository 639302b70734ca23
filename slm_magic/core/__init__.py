"""What every layer shares and that depends on nothing of ours: the text analyser, the day
words of a question, ids, the user's name, the merge rule of growing lists."""
