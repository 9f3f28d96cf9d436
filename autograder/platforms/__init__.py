"""The platforms' doors: Gradescope's autograder and PrairieLearn's external grader (autograder.platforms.door:
what both share). Each grades through `course grade`'s steps and writes its platform's results.json."""
