"""The dashboard's views: each module turns plain data into images, figures or tables (testable
without a browser) and has a ``render`` that draws them with Streamlit."""
