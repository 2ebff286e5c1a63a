from durq.cli import main

main()
