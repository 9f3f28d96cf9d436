"""The chapter site: stage 01 as one static page, built from the course's own sources (`course site build`).

Modules, one role each: content (the site's own words, site/content/), notebook_cells (a lab's `site:show`
cells and their colours), frames (the schedule model on the lab solution's pallas_call), walk_steps (guided
walks), sandbox_data (what the page's legality arithmetic needs), build (render and write). Templates, styles
and scripts live in the top-level site/ folder.
"""
