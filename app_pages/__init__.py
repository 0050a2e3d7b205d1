"""Streamlit page modules of the curator app (UI only; the logic lives in curation/).

``app.py`` signs the user in and hands these files to ``st.navigation``. Each page runs its
``main()`` when Streamlit executes it as a script; importing a page module draws nothing.
"""
