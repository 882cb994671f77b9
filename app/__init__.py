"""LSB Explorer's Streamlit dashboard: sidebar inputs -> a ``lsbcore.Comparison`` -> live views."""
