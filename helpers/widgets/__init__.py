"""Interactive views for the notebooks: a slider over an agent run's steps, and over a guided reply's tokens.

Every view comes twice: a static rendering (inline-styled HTML, every frame of it, which GitHub and nbval show)
and a widget built from core ipywidgets only (IntSlider, Play, HTML, Image, VBox, HBox), which run alike in
JupyterLab's ipywidgets 8 and Colab's 7.7. The views take plain data (strings, bytes, lists): they import no
lesson module, and a lesson module turns what it records into their frames.

| module         | holds                                                                                   |
|----------------|-----------------------------------------------------------------------------------------|
| `slider`       | the one slider both views share: a Play button and an IntSlider over numbered pages      |
| `step_through` | an agent run, step by step: the screen, the proposed step, the harness's verdict, the ledger |
| `tokens`       | a guided reply, token by token: who chose each token, how many were allowed, the alternatives |
"""
