# What `pip install .` puts in the wheel (pyproject.toml, scikit-build-core), as the install
# component "wheel" (the C++ install, `cmake --install`, is the unnamed component):
# - the Python package atoll (its .py files come from python/atoll through the wheel's
#   package list; here the extension and the generated stubs),
# - the services and the `atoll` CLI into the environment's bin/ (the scripts directory),
#   where `atoll up` finds the services beside itself,
# - the default cluster config into <prefix>/share/atoll/local.toml, where the CLI looks for
#   it when there is no ./config/local.toml (cli/start_path.h).
install(TARGETS atoll_python LIBRARY DESTINATION atoll COMPONENT wheel)
install(FILES ${ATOLL_PYTHON_DIR}/atoll/ops.pyi DESTINATION atoll COMPONENT wheel)
install(TARGETS atoll atoll-rm atoll-scheduler atoll-executor atoll-objectstore atoll-simhosts
        RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR} COMPONENT wheel)
install(FILES ${PROJECT_SOURCE_DIR}/config/local.toml DESTINATION ${SKBUILD_DATA_DIR}/share/atoll
        COMPONENT wheel)
